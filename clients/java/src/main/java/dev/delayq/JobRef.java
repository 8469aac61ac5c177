package dev.delayq;

/** Names a job by its id or by its key: {@link #id(String)}, {@link #key(String)}. */
public record JobRef(String id, String key) {
  public JobRef {
    if ((id == null || id.isEmpty()) == (key == null || key.isEmpty())) {
      throw new DelayqException.InvalidArgument("give the job's id or its key (one of them)");
    }
  }

  public static JobRef id(String id) {
    return new JobRef(id, null);
  }

  public static JobRef key(String key) {
    return new JobRef(null, key);
  }
}
