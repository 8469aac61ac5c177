package dev.delayq;

import java.util.List;
import java.util.Map;

/** One page of a listing: {@code nextCursor} is null on the last page. */
public record JobPage(List<JobInfo> jobs, String nextCursor) {
  static JobPage of(Object answer) {
    Map<String, Object> m = Values.object(answer);
    return new JobPage(Values.list(m, "jobs").stream().map(JobInfo::of).toList(), Values.str(m, "next_cursor"));
  }
}
