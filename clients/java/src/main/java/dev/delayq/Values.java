package dev.delayq;

import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Reading the fields of an answer's JSON object. */
final class Values {
  private Values() {}

  @SuppressWarnings("unchecked")
  static Map<String, Object> object(Object v) {
    if (v instanceof Map<?, ?> m) return (Map<String, Object>) m;
    throw new DelayqException("internal", 0, "the server's answer is not the JSON object expected", null, null);
  }

  @SuppressWarnings("unchecked")
  static List<Object> list(Map<String, Object> m, String field) {
    Object v = m.get(field);
    return v instanceof List<?> l ? (List<Object>) l : List.of();
  }

  static String str(Map<String, Object> m, String field) {
    return m.get(field) instanceof String s ? s : null;
  }

  static long num(Map<String, Object> m, String field) {
    return m.get(field) instanceof Number n ? n.longValue() : 0;
  }

  static boolean bool(Map<String, Object> m, String field) {
    return Boolean.TRUE.equals(m.get(field));
  }

  static Map<String, String> headers(Map<String, Object> m) {
    Map<String, String> h = new LinkedHashMap<>();
    if (m.get("headers") instanceof Map<?, ?> given) {
      given.forEach((k, v) -> h.put(String.valueOf(k), String.valueOf(v)));
    }
    return h;
  }

  /** A job's payload: the JSON value as parsed, or the bytes of a binary one. */
  static Object payload(Map<String, Object> m) {
    if (m.get("payload_base64") instanceof String b64) return Base64.getDecoder().decode(b64);
    return m.get("payload");
  }
}
