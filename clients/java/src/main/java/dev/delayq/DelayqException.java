package dev.delayq;

import java.util.Map;

/**
 * Any error from delayq: the server's {@link #code()} ("not_found", ...), the HTTP
 * {@link #status()} (0 when no answer came) and a message that names what was wrong and what would
 * be right. Each kind is a subclass, so a catch picks the kinds it handles:
 * {@link InvalidArgument} (400; {@link TooLarge}, 413), {@link Unauthenticated} (401),
 * {@link Forbidden} (403), {@link NotFound} (404), {@link Conflict} (409; {@link LeaseExpired}),
 * {@link Overloaded} (429, 507), {@link Unavailable} (503, a proxy's 502 and 504, or no answer at all: its cause is the
 * network error).
 */
public class DelayqException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final String code;
  private final int status;
  private final String receipt;

  public DelayqException(String code, int status, String message, String receipt, Throwable cause) {
    super(message, cause);
    this.code = code;
    this.status = status;
    this.receipt = receipt;
  }

  /** The server's error code ("not_found", ...). */
  public String code() {
    return code;
  }

  /** The HTTP status; 0 when no answer came. */
  public int status() {
    return status;
  }

  /** In a {@link BatchResult}'s failures: the receipt this is about; else null. */
  public String receipt() {
    return receipt;
  }

  @Override
  public String toString() {
    return code + ": " + getMessage();
  }

  /** 400: a malformed request, a bad field (named), an unknown field. */
  public static class InvalidArgument extends DelayqException {
    private static final long serialVersionUID = 1L;

    public InvalidArgument(String code, int status, String message, String receipt) {
      super(code, status, message, receipt, null);
    }

    public InvalidArgument(String message) {
      this("invalid_argument", 0, message, null);
    }
  }

  /** 413: a payload over the queue's max_payload, a body or batch over the server's limit. */
  public static class TooLarge extends InvalidArgument {
    private static final long serialVersionUID = 1L;

    public TooLarge(String code, int status, String message, String receipt) {
      super(code, status, message, receipt);
    }
  }

  /** 401: the server wants a (different) bearer token. */
  public static class Unauthenticated extends DelayqException {
    private static final long serialVersionUID = 1L;

    public Unauthenticated(String code, int status, String message, String receipt) {
      super(code, status, message, receipt, null);
    }
  }

  /** 403: a foreign Origin or an unexpected Host. */
  public static class Forbidden extends DelayqException {
    private static final long serialVersionUID = 1L;

    public Forbidden(String code, int status, String message, String receipt) {
      super(code, status, message, receipt, null);
    }
  }

  /** 404: no such job, key, queue or route. */
  public static class NotFound extends DelayqException {
    private static final long serialVersionUID = 1L;

    public NotFound(String code, int status, String message, String receipt) {
      super(code, status, message, receipt, null);
    }
  }

  /** 409: the job's state forbids it (cancel a reserved job, reschedule a dead one). */
  public static class Conflict extends DelayqException {
    private static final long serialVersionUID = 1L;

    public Conflict(String code, int status, String message, String receipt) {
      super(code, status, message, receipt, null);
    }
  }

  /** 409 lease_expired: the delivery is over (the job was delivered again, or went dead). */
  public static class LeaseExpired extends Conflict {
    private static final long serialVersionUID = 1L;

    public LeaseExpired(String code, int status, String message, String receipt) {
      super(code, status, message, receipt);
    }
  }

  /** 429 (or 507): refused for load or a limit (waiting reserves, queues, memory). */
  public static class Overloaded extends DelayqException {
    private static final long serialVersionUID = 1L;

    public Overloaded(String code, int status, String message, String receipt) {
      super(code, status, message, receipt, null);
    }
  }

  /** 503 (a proxy's 502, 504), or no answer at all: down, starting, stopping, or its store cannot serve now. */
  public static class Unavailable extends DelayqException {
    private static final long serialVersionUID = 1L;

    public Unavailable(String code, int status, String message, String receipt, Throwable cause) {
      super(code, status, message, receipt, cause);
    }
  }

  private interface Maker {
    DelayqException make(String code, int status, String message, String receipt);
  }

  private static final Map<String, Maker> BY_CODE = Map.ofEntries(
      Map.entry("invalid_argument", InvalidArgument::new),
      Map.entry("unsupported_media_type", InvalidArgument::new),
      Map.entry("method_not_allowed", InvalidArgument::new),
      Map.entry("too_large", TooLarge::new),
      Map.entry("unauthenticated", Unauthenticated::new),
      Map.entry("forbidden", Forbidden::new),
      Map.entry("not_found", NotFound::new),
      Map.entry("conflict", Conflict::new),
      Map.entry("lease_expired", LeaseExpired::new),
      Map.entry("resource_exhausted", Overloaded::new),
      Map.entry("unavailable", (c, s, m, r) -> new Unavailable(c, s, m, r, null)),
      Map.entry("io_error", (c, s, m, r) -> new Unavailable(c, s, m, r, null)));

  // 502 and 504 are a proxy's: delayq is down or restarting behind it.
  private static final Map<Integer, String> CODE_BY_STATUS = Map.ofEntries(Map.entry(400, "invalid_argument"),
      Map.entry(401, "unauthenticated"), Map.entry(403, "forbidden"), Map.entry(404, "not_found"),
      Map.entry(409, "conflict"), Map.entry(413, "too_large"), Map.entry(429, "resource_exhausted"),
      Map.entry(502, "unavailable"), Map.entry(503, "unavailable"), Map.entry(504, "unavailable"),
      Map.entry(507, "resource_exhausted"));

  /** The exception of an answer: by its code, else by its HTTP status. */
  static DelayqException of(int status, String code, String message, String receipt) {
    String c = code != null ? code : CODE_BY_STATUS.getOrDefault(status, "http_" + status);
    Maker maker = BY_CODE.get(c);
    if (maker == null) maker = BY_CODE.get(CODE_BY_STATUS.getOrDefault(status, ""));
    if (maker == null) return new DelayqException(c, status, message, receipt, null);
    return maker.make(c, status, message, receipt);
  }
}
