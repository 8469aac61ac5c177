package dev.delayq;

import java.util.List;
import java.util.Map;

/**
 * A job as get, waitFor and the listings show it. {@code state}: scheduled, ready, reserved, dead,
 * completed, or cancelled (only a wait answers it). Times are epoch ms (0: none).
 * {@code progress} (while reserved: its delivery's last progress) and {@code result} (when
 * completed: its ack's result) are JSON values, null when none.
 */
public record JobInfo(String id, String queue, String state, long dueAt, int attempt, int maxAttempts, Object payload,
    String key, Map<String, String> headers, long createdAt, String lastError, long leaseDeadline, long deadAt,
    long completedAt, int priority, String group, String traceparent, String tracestate, Object progress,
    Object result) {
  /** The states a wait for an outcome ends on. */
  public static final List<String> FINAL_STATES = List.of("completed", "dead", "cancelled");

  /** Whether the job is completed, dead or cancelled. */
  public boolean isFinal() {
    return FINAL_STATES.contains(state);
  }

  static JobInfo of(Object answer) {
    Map<String, Object> m = Values.object(answer);
    return new JobInfo(Values.str(m, "id"), Values.str(m, "queue"), Values.str(m, "state"), Values.num(m, "due_at"),
        (int) Values.num(m, "attempt"), (int) Values.num(m, "max_attempts"), Values.payload(m), Values.str(m, "key"),
        Values.headers(m), Values.num(m, "created_at"), Values.str(m, "last_error"), Values.num(m, "lease_deadline"),
        Values.num(m, "dead_at"), Values.num(m, "completed_at"), (int) Values.num(m, "priority"), Values.str(m, "group"),
        Values.str(m, "traceparent"), Values.str(m, "tracestate"), m.get("progress"), m.get("result"));
  }
}
