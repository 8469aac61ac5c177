package dev.delayq;

import java.util.Map;

/**
 * What an enqueue answers: the job's id, when it is due (epoch ms), and whether the key named a
 * live job already (duplicate: this is that job; replaced: it was rewritten).
 */
public record EnqueueResult(String id, long dueAt, boolean duplicate, boolean replaced) {
  static EnqueueResult of(Object answer) {
    Map<String, Object> m = Values.object(answer);
    return new EnqueueResult(Values.str(m, "id"), Values.num(m, "due_at"), Values.bool(m, "duplicate"), Values.bool(m, "replaced"));
  }
}
