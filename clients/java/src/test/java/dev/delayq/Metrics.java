package dev.delayq;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Reads a server's state for a test to follow (its /metrics, its stats): polls, not sleeps. */
final class Metrics {
  private static final Pattern WAITING = Pattern.compile("(?m)^delayq_reserve_waiting (\\d+)");

  private Metrics() {}

  /** Returns once the server holds n waits, so that what follows comes after them. */
  static void awaitOpenWaits(String url, int n) throws Exception {
    HttpClient http = HttpClient.newHttpClient();
    for (long start = System.nanoTime(); System.nanoTime() - start < 30_000_000_000L; ) {
      try {
        String text = http.send(HttpRequest.newBuilder(URI.create(url + "/metrics")).build(), HttpResponse.BodyHandlers.ofString()).body();
        Matcher m = WAITING.matcher(text);
        if (m.find() && Integer.parseInt(m.group(1)) >= n) return;
      } catch (java.io.IOException notYet) {
        // a server starting again
      }
      Thread.sleep(10); // a poll of the server's state
    }
    throw new AssertionError(n + " waits did not open on the server");
  }

  /** Returns once the queue holds no job (each handled and acked), as the server tells it. */
  static void awaitDrained(Client c, String queue) throws Exception {
    for (long start = System.nanoTime(); System.nanoTime() - start < 60_000_000_000L; ) {
      try {
        var s = c.stats(queue);
        long live = 0;
        for (String f : new String[] {"scheduled", "ready", "reserved", "dead"}) live += ((Number) s.get(f)).longValue();
        if (live == 0) return;
      } catch (DelayqException notYet) {
        // a server starting again
      }
      Thread.sleep(20); // a poll of the server's state
    }
    throw new AssertionError("queue " + queue + " still holds jobs after 60 s");
  }
}
