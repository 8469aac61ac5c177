package dev.delayq;

import java.util.List;
import java.util.Map;

/**
 * A batch ack, nack, touch or release: not all or nothing. {@code failed} holds an exception for
 * each receipt that failed ({@link DelayqException#receipt()} names it).
 */
public record BatchResult(int done, List<DelayqException> failed) {
  static BatchResult of(Object answer, String countField) {
    Map<String, Object> m = Values.object(answer);
    List<DelayqException> failed = Values.list(m, "failed").stream().map(f -> {
      Map<String, Object> e = Values.object(f);
      String code = Values.str(e, "code");
      int status = "lease_expired".equals(code) || "conflict".equals(code) ? 409 : "not_found".equals(code) ? 404 : 400;
      return DelayqException.of(status, code, Values.str(e, "message"), Values.str(e, "receipt"));
    }).toList();
    return new BatchResult((int) Values.num(m, countField), failed);
  }
}
