package dev.delayq;

import java.util.Map;

/**
 * A delivery, as reserve hands it out: settle it with ack, nack, touch or release and its receipt.
 * {@code payload} is the JSON value enqueued (Map, List, String, Json.Number, Boolean, null), or
 * {@code byte[]} for a binary payload; {@code leaseDeadline} is epoch ms (touch before it);
 * {@code traceparent}/{@code tracestate} are the producer's W3C Trace Context (null when none).
 */
public record Job(String id, String receipt, Object payload, int attempt, int maxAttempts, long dueAt, String key,
    Map<String, String> headers, long leaseDeadline, int priority, String group, String traceparent, String tracestate) {
  static Job of(Object answer) {
    Map<String, Object> m = Values.object(answer);
    return new Job(Values.str(m, "id"), Values.str(m, "receipt"), Values.payload(m), (int) Values.num(m, "attempt"),
        (int) Values.num(m, "max_attempts"), Values.num(m, "due_at"), Values.str(m, "key"), Values.headers(m),
        Values.num(m, "lease_deadline"), (int) Values.num(m, "priority"), Values.str(m, "group"),
        Values.str(m, "traceparent"), Values.str(m, "tracestate"));
  }
}
