package dev.delayq;

import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A job to enqueue, built with {@link #of(Object)}:
 *
 * <pre>{@code
 * NewJob.of(Map.of("orderId", 42)).delay(Duration.ofMinutes(30)).key("order-42")
 * }</pre>
 *
 * The payload is any JSON value this client writes (Map, List, String, Number, Boolean, null), a
 * {@link Json.Raw} sent as written, or {@code byte[]}: a binary payload. It is due after
 * {@link #delay}, or at {@link #deliverAt} (not both); now without either.
 */
public final class NewJob {
  private final Object payload;
  private Duration delay;
  private Instant deliverAt;
  private String key;
  private boolean replace;
  private boolean debounce;
  private Duration keyTtl;
  private Map<String, String> headers;
  private Integer maxAttempts;
  private Integer priority;
  private String group;
  private String traceparent;
  private String tracestate;

  private NewJob(Object payload) {
    this.payload = payload;
  }

  public static NewJob of(Object payload) {
    return new NewJob(payload);
  }

  public NewJob delay(Duration d) {
    this.delay = d;
    return this;
  }

  public NewJob deliverAt(Instant at) {
    this.deliverAt = at;
    return this;
  }

  /** A key names at most one live job of the queue: an enqueue with it answers that job. */
  public NewJob key(String k) {
    this.key = k;
    return this;
  }

  /** With a key naming a live job: rewrite it (payload, headers, due time). */
  public NewJob replace() {
    this.replace = true;
    return this;
  }

  /** With a key naming a live job: rewrite it and move it later, never earlier. */
  public NewJob debounce() {
    this.debounce = true;
    return this;
  }

  /** Keeps the key taken this long after the job is acked or cancelled. */
  public NewJob keyTtl(Duration ttl) {
    this.keyTtl = ttl;
    return this;
  }

  public NewJob headers(Map<String, String> h) {
    this.headers = h;
    return this;
  }

  public NewJob maxAttempts(int n) {
    this.maxAttempts = n;
    return this;
  }

  /** 0..9 and a group (a tenant, say) order the ready jobs. */
  public NewJob priority(int p) {
    this.priority = p;
    return this;
  }

  public NewJob group(String g) {
    this.group = g;
    return this;
  }

  /** The producer's W3C Trace Context, handed to the consumer. */
  public NewJob traceContext(String traceparent, String tracestate) {
    this.traceparent = traceparent;
    this.tracestate = tracestate;
    return this;
  }

  Map<String, Object> body() {
    Map<String, Object> b = new LinkedHashMap<>();
    if (payload instanceof byte[] bytes) {
      b.put("payload_base64", Base64.getEncoder().encodeToString(bytes));
    } else {
      b.put("payload", payload);
    }
    Client.when(b, delay, deliverAt);
    if (key != null) b.put("key", key);
    if (replace) b.put("replace", true);
    if (debounce) b.put("debounce", true);
    if (keyTtl != null) b.put("key_ttl_ms", Client.ms(keyTtl));
    if (headers != null && !headers.isEmpty()) b.put("headers", headers);
    if (maxAttempts != null) b.put("max_attempts", maxAttempts);
    if (priority != null) b.put("priority", priority);
    if (group != null) b.put("group", group);
    if (traceparent != null) {
      b.put("traceparent", traceparent);
      if (tracestate != null) b.put("tracestate", tracestate);
    } else if (tracestate != null) {
      throw new DelayqException.InvalidArgument("a tracestate was given without a traceparent: give both, or neither");
    }
    return b;
  }
}
