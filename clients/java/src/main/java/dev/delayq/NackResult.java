package dev.delayq;

import java.util.Map;

/** What a nack answers: "scheduled" (retried at dueAt, epoch ms) or "dead". */
public record NackResult(String state, long dueAt) {
  static NackResult of(Object answer) {
    Map<String, Object> m = Values.object(answer);
    return new NackResult(Values.str(m, "state"), Values.num(m, "due_at"));
  }
}
