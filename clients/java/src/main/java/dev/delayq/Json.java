package dev.delayq;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The JSON codec of this client. The JDK has no JSON parser and the client takes no dependency
 * (issue 32: java.net.http only), so this small one reads the server's answers and writes
 * requests. Objects are {@code LinkedHashMap<String, Object>} (their order kept), arrays
 * {@code List<Object>}, strings {@code String}, {@code true}/{@code false} {@code Boolean},
 * {@code null} null, and numbers {@link Number} (the text as written, so a number is written back
 * digit for digit). It refuses what RFC 8259 refuses and nesting past 512 levels; a key given twice
 * in an object keeps its last value (the server keeps a payload's duplicate keys as written, and a
 * Map holds one).
 */
public final class Json {
  private static final int MAX_DEPTH = 512;

  private Json() {}

  /** A JSON number, kept as its text. */
  public static final class Number extends java.lang.Number {
    private static final long serialVersionUID = 1L;
    private final String text;

    Number(String text) {
      this.text = text;
    }

    @Override
    public long longValue() {
      return new BigDecimal(text).longValue();
    }

    @Override
    public int intValue() {
      return (int) longValue();
    }

    @Override
    public double doubleValue() {
      return Double.parseDouble(text);
    }

    @Override
    public float floatValue() {
      return (float) doubleValue();
    }

    public BigDecimal decimalValue() {
      return new BigDecimal(text);
    }

    @Override
    public String toString() {
      return text;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Number n && n.text.equals(text);
    }

    @Override
    public int hashCode() {
      return text.hashCode();
    }
  }

  /** JSON text to be written as it is (a payload or result the caller already has as JSON). */
  public record Raw(String text) {
    public Raw {
      if (text == null) throw new DelayqException.InvalidArgument("Json.Raw needs JSON text, not null");
      try {
        parse(text); // refused here, before anything is sent, when it is not JSON
      } catch (IllegalArgumentException e) {
        throw new DelayqException.InvalidArgument("Json.Raw: " + e.getMessage());
      }
    }

    @Override
    public String toString() {
      return text;
    }
  }

  /** Parses JSON text; IllegalArgumentException names where it is not JSON. */
  public static Object parse(String text) {
    Parser p = new Parser(text);
    p.space();
    Object v = p.value(0);
    p.space();
    if (p.at < text.length()) throw p.error("text after the JSON value");
    return v;
  }

  /** Writes a value: Map, Collection, array of Object, String, Number, Boolean, null, Raw. */
  public static String write(Object value) {
    StringBuilder out = new StringBuilder();
    write(out, value, 0);
    return out.toString();
  }

  private static void write(StringBuilder out, Object v, int depth) {
    if (depth > MAX_DEPTH) throw new IllegalArgumentException("the value nests deeper than " + MAX_DEPTH + " levels");
    if (v == null) {
      out.append("null");
    } else if (v instanceof Raw raw) {
      out.append(raw.text());
    } else if (v instanceof String s) {
      string(out, s);
    } else if (v instanceof Boolean b) {
      out.append(b);
    } else if (v instanceof Double || v instanceof Float) {
      double d = ((java.lang.Number) v).doubleValue();
      if (Double.isNaN(d) || Double.isInfinite(d)) {
        throw new IllegalArgumentException(d + " is not a JSON number (JSON has no NaN or Infinity)");
      }
      boolean whole = d == Math.rint(d) && Math.abs(d) < 1e15 && !(d == 0 && 1 / d < 0); // -0.0 stays -0.0
      // A float as a float reads it: 0.1f is 0.1, not its double 0.10000000149011612.
      out.append(whole ? Long.toString((long) d) : v instanceof Float f ? Float.toString(f) : Double.toString(d));
    } else if (v instanceof BigDecimal d) {
      out.append(d.toString());
    } else if (v instanceof java.lang.Number n) {
      out.append(n.toString()); // Integer, Long, BigInteger, Json.Number: their digits
    } else if (v instanceof Map<?, ?> m) {
      out.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> e : m.entrySet()) {
        if (!(e.getKey() instanceof String key)) throw new IllegalArgumentException("a JSON object's keys are strings, not " + e.getKey());
        if (!first) out.append(',');
        first = false;
        string(out, key);
        out.append(':');
        write(out, e.getValue(), depth + 1);
      }
      out.append('}');
    } else if (v instanceof Collection<?> c) {
      array(out, c, depth);
    } else if (v instanceof Object[] a) {
      array(out, java.util.Arrays.asList(a), depth); // not List.of: it refuses a null element
    } else {
      throw new IllegalArgumentException("a " + v.getClass().getName() + " is not a JSON value: give a Map, List, String, Number, Boolean, null or Json.Raw");
    }
  }

  private static void array(StringBuilder out, Collection<?> c, int depth) {
    out.append('[');
    boolean first = true;
    for (Object e : c) {
      if (!first) out.append(',');
      first = false;
      write(out, e, depth + 1);
    }
    out.append(']');
  }

  private static void string(StringBuilder out, String s) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        case '\b' -> out.append("\\b");
        case '\f' -> out.append("\\f");
        default -> {
          if (c < 0x20 || Character.isSurrogate(c) && !wellPaired(s, i)) {
            out.append(String.format("\\u%04x", (int) c)); // a lone surrogate is not UTF-8: escaped
          } else {
            out.append(c);
          }
        }
      }
    }
    out.append('"');
  }

  private static boolean wellPaired(String s, int i) {
    char c = s.charAt(i);
    if (Character.isHighSurrogate(c)) return i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
    return i > 0 && Character.isHighSurrogate(s.charAt(i - 1));
  }

  private static final class Parser {
    final String s;
    int at;

    Parser(String s) {
      this.s = s;
    }

    IllegalArgumentException error(String what) {
      return new IllegalArgumentException("not JSON: " + what + " at character " + at);
    }

    void space() {
      while (at < s.length() && " \t\r\n".indexOf(s.charAt(at)) >= 0) at++;
    }

    Object value(int depth) {
      if (depth > MAX_DEPTH) throw error("nesting deeper than " + MAX_DEPTH + " levels");
      if (at >= s.length()) throw error("the end of the text where a value was expected");
      char c = s.charAt(at);
      switch (c) {
        case '{':
          return object(depth);
        case '[':
          return array(depth);
        case '"':
          return string();
        case 't':
          return word("true", Boolean.TRUE);
        case 'f':
          return word("false", Boolean.FALSE);
        case 'n':
          return word("null", null);
        default:
          if (c == '-' || (c >= '0' && c <= '9')) return number();
          throw error("'" + c + "'");
      }
    }

    Object word(String w, Object v) {
      if (!s.startsWith(w, at)) throw error("an unknown word");
      at += w.length();
      return v;
    }

    Map<String, Object> object(int depth) {
      Map<String, Object> m = new LinkedHashMap<>();
      at++;
      space();
      if (peek() == '}') {
        at++;
        return m;
      }
      while (true) {
        space();
        if (peek() != '"') throw error("an object key that is not a string");
        String key = string();
        space();
        expect(':');
        space();
        m.put(key, value(depth + 1));
        space();
        if (peek() == ',') {
          at++;
          continue;
        }
        expect('}');
        return m;
      }
    }

    List<Object> array(int depth) {
      List<Object> a = new ArrayList<>();
      at++;
      space();
      if (peek() == ']') {
        at++;
        return a;
      }
      while (true) {
        space();
        a.add(value(depth + 1));
        space();
        if (peek() == ',') {
          at++;
          continue;
        }
        expect(']');
        return a;
      }
    }

    char peek() {
      if (at >= s.length()) throw error("the end of the text");
      return s.charAt(at);
    }

    void expect(char c) {
      if (peek() != c) throw error("'" + s.charAt(at) + "' where '" + c + "' was expected");
      at++;
    }

    String string() {
      at++;
      StringBuilder b = new StringBuilder();
      while (true) {
        char c = peek();
        at++;
        if (c == '"') return b.toString();
        if (c < 0x20) throw error("a control character in a string");
        if (c != '\\') {
          b.append(c);
          continue;
        }
        char e = peek();
        at++;
        switch (e) {
          case '"', '\\', '/' -> b.append(e);
          case 'b' -> b.append('\b');
          case 'f' -> b.append('\f');
          case 'n' -> b.append('\n');
          case 'r' -> b.append('\r');
          case 't' -> b.append('\t');
          case 'u' -> {
            if (at + 4 > s.length()) throw error("a short \\u escape");
            try {
              b.append((char) Integer.parseInt(s.substring(at, at + 4), 16));
            } catch (NumberFormatException x) {
              throw error("a \\u escape that is not hexadecimal");
            }
            at += 4;
          }
          default -> throw error("the escape \\" + e);
        }
      }
    }

    Number number() {
      int start = at;
      if (peek() == '-') at++;
      if (at < s.length() && s.charAt(at) == '0') {
        at++;
      } else if (!digits()) {
        throw error("a number without digits");
      }
      if (at < s.length() && s.charAt(at) == '.') {
        at++;
        if (!digits()) throw error("a number with no digits after its point");
      }
      if (at < s.length() && (s.charAt(at) == 'e' || s.charAt(at) == 'E')) {
        at++;
        if (at < s.length() && (s.charAt(at) == '+' || s.charAt(at) == '-')) at++;
        if (!digits()) throw error("a number with no digits in its exponent");
      }
      return new Number(s.substring(start, at));
    }

    boolean digits() {
      int start = at;
      while (at < s.length() && s.charAt(at) >= '0' && s.charAt(at) <= '9') at++;
      return at > start;
    }
  }
}
