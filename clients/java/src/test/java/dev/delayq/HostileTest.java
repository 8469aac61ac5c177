package dev.delayq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** Found by a hostile try of the client from its docs alone; each failed before its fix. */
class HostileTest {
  private static void refused(String naming, org.junit.jupiter.api.function.Executable call) {
    DelayqException e = assertThrows(DelayqException.InvalidArgument.class, call);
    assertTrue(e.getMessage().contains(naming), () -> "\"" + e.getMessage() + "\" does not name " + naming);
  }

  @Test
  void nullsHugeDurationsAndABadTokenAreInvalidArgumentsNotCrashes() throws Exception {
    try (Server s = new Server()) {
      Client c = Client.builder(s.url).build();
      refused("job", () -> c.enqueue("q", null));
      CompletionException async = assertThrows(CompletionException.class, () -> c.enqueueAsync("q", null).join());
      assertTrue(async.getCause() instanceof DelayqException.InvalidArgument);
      refused("list", () -> c.enqueueBatch("q", null));
      refused("job of the list", () -> c.enqueueBatch("q", java.util.Arrays.asList(NewJob.of(1), null)));
      refused("JobRef", () -> c.get("q", null));
      refused("list of acks", () -> c.ackBatch("q", null));
      refused("receipts", () -> c.release("q", null));
      refused("url", () -> Client.builder(null).build());
      refused("timeout", () -> Client.builder(s.url).timeout(null).build());
      refused("line end", () -> Client.builder(s.url).token("s3cret\n").build());
      refused("JSON text", () -> new Json.Raw(null));
      refused("Json.Raw", () -> new Json.Raw("{"));
      // Past what Duration.toMillis and Instant.toEpochMilli hold: the server names the field.
      refused("delay", () -> c.enqueue("q", NewJob.of(1).delay(Duration.ofSeconds(Long.MAX_VALUE))));
      refused("deliver_at", () -> c.enqueue("q", NewJob.of(1).deliverAt(Instant.MAX)));
      refused("key_ttl", () -> c.enqueue("q", NewJob.of(1).key("k").keyTtl(Duration.ofSeconds(Long.MAX_VALUE))));
      refused("wait_ms", () -> c.reserve("q", 1, Duration.ofSeconds(Long.MAX_VALUE), null));
      // A second hostile try: nulls that were sent (a literal state=null, an empty body), an empty
      // release, a "no timeout" that overflowed every call, progress outside a handler.
      refused("receipt", () -> c.ack("q", null, null));
      refused("state", () -> c.jobs("q", null, 10, null));
      refused("state", () -> c.forEachJob("q", null, j -> { }));
      refused("config", () -> c.setConfig("q", null));
      refused("spec", () -> c.putSchedule("q", "s", null));
      refused("no receipt", () -> c.release("q", List.of()));
      refused("up to 1 day", () -> Client.builder(s.url).timeout(Duration.ofSeconds(Long.MAX_VALUE)).build());
      Worker idle = Worker.builder(c, "q", job -> null).build();
      Job notHere = new Job("01HZZZZZZZZZZZZZZZZZZZZZZZ", "r", 1, 1, 1, 0, null, Map.of(), 0, 0, null, null, null);
      refused("not running", () -> idle.progress(notHere, 1));
      assertTrue(c.queues().isEmpty(), "a refused request created a queue");
      // Values the codec wrote wrong or refused: a null element, a float, a negative zero.
      assertEquals("[1,null,0.1,-0.0]", Json.write(new Object[] {1, null, 0.1f, -0.0}));
      // A queue named "." or "..": a proxy, curl or a browser takes a dot segment out of the path.
      refused("dot segment", () -> c.enqueue("..", NewJob.of(1)));
      refused("dot segment", () -> c.enqueue(".", NewJob.of(1)));
      c.enqueue("limits", NewJob.of(1));
      assertEquals(1, c.jobs("limits", "ready", 0, null).jobs().size(), "a limit of 0 is the default, as Go's");
      // A wait of a century or more is a wait of a century, not one that ends at once.
      EnqueueResult later = c.enqueue("q", NewJob.of(1).delay(Duration.ofHours(1)));
      CompletableFuture<JobInfo> forever = c.waitForAsync("q", JobRef.id(later.id()), Duration.ofSeconds(Long.MAX_VALUE));
      Metrics.awaitOpenWaits(s.url, 1);
      assertFalse(forever.isDone());
      c.cancel("q", JobRef.id(later.id()));
      assertEquals("cancelled", forever.get(30, TimeUnit.SECONDS).state());
    }
  }

  /** The server keeps a payload's duplicate keys as written; reading such a job must not fail. */
  @Test
  void aJobWhosePayloadRepeatsAKeyIsReadAndHandled() throws Exception {
    try (Server s = new Server()) {
      Client c = Client.builder(s.url).build();
      HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(s.url + "/v1/queues/dup/jobs"))
          .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString("{\"payload\":{\"a\":1,\"a\":2}}")).build(),
          HttpResponse.BodyHandlers.ofString());
      Job job = c.reserve("dup", 1, null, null).get(0);
      assertEquals(2L, ((Number) ((Map<?, ?>) job.payload()).get("a")).longValue(), "the last value of the key");
      c.ack("dup", job.receipt(), null);
    }
  }

  /** A wait on a full server (--max-waiting) answers the job as it is at its timeout, not Overloaded before it. */
  @Test
  void aWaitOnAFullServerAnswersTheJobAsItIsAtItsTimeout() throws Exception {
    try (Server s = new Server("--max-waiting", "1")) {
      Client c = Client.builder(s.url).build();
      EnqueueResult job = c.enqueue("full", NewJob.of(1).delay(Duration.ofHours(1)));
      c.reserveAsync("other", 1, Duration.ofSeconds(20), null); // takes the one room
      Metrics.awaitOpenWaits(s.url, 1);
      long start = System.nanoTime();
      JobInfo j = c.waitFor("full", JobRef.id(job.id()), Duration.ofMillis(1500));
      assertEquals("scheduled", j.state());
      assertTrue(System.nanoTime() - start >= 1_400_000_000L);
    }
  }

  /** A job handed out again while its handler runs goes to another slot: it is not run twice. */
  @Test
  void aJobDeliveredAgainWhileItsHandlerRunsIsNotRunTwice() throws Exception {
    try (Server s = new Server()) {
      Client c = Client.builder(s.url).build();
      String id = c.enqueue("again", NewJob.of(1)).id();
      AtomicInteger runs = new AtomicInteger();
      Worker[] w = new Worker[1];
      w[0] = Worker.builder(c, "again", job -> {
        runs.incrementAndGet();
        c.release("again", List.of(job.receipt())); // as a lease running out does, at once
        for (long start = System.nanoTime(); w[0].redelivered() == 0 && System.nanoTime() - start < 30_000_000_000L; ) {
          Thread.sleep(20); // the handler's work: until the job came again
        }
        w[0].stop();
        return "once";
      }).concurrency(2).poll(Duration.ofMillis(200)).build();
      w[0].run();
      assertEquals(List.of(1, 1L, 1L), List.of(runs.get(), w[0].redelivered(), w[0].acked()));
      assertThrows(DelayqException.NotFound.class, () -> c.get("again", JobRef.id(id)));
    }
  }

  /** An Error nacks its job like any failure; close() from a handler does not wait for itself. */
  @Test
  void anErrorNacksItsJobAndCloseFromAHandlerReturns() throws Exception {
    try (Server s = new Server()) {
      Client c = Client.builder(s.url).build();
      String id = c.enqueue("err", NewJob.of(1).maxAttempts(1)).id();
      Worker[] w = new Worker[1];
      CountDownLatch closed = new CountDownLatch(1);
      w[0] = Worker.builder(c, "err", job -> {
        w[0].close(); // from its own handler: stops, returns
        closed.countDown();
        throw new AssertionError("invariant broken");
      }).poll(Duration.ofMillis(200)).start();
      assertTrue(closed.await(30, TimeUnit.SECONDS));
      w[0].close();
      JobInfo dead = c.get("err", JobRef.id(id));
      assertEquals(List.of("dead", "AssertionError: invariant broken"), List.of(dead.state(), dead.lastError()));
    }
  }

  /** An ack the server could not take (killed, started again) is sent again while the lease holds. */
  @Test
  void anAckWhileTheServerIsDownIsSentAgainOnceItIsBack() throws Exception {
    try (Server s = new Server("--durability", "sync")) {
      Client c = Client.builder(s.url).timeout(Duration.ofSeconds(2)).build();
      String id = c.enqueue("acks", NewJob.of(1)).id();
      CountDownLatch gone = new CountDownLatch(1);
      CountDownLatch back = new CountDownLatch(1);
      AtomicInteger runs = new AtomicInteger();
      Worker w = Worker.builder(c, "acks", job -> {
        runs.incrementAndGet();
        gone.countDown();
        back.await();
        return null;
      }).lease(Duration.ofSeconds(30)).poll(Duration.ofMillis(200)).start();
      assertTrue(gone.await(30, TimeUnit.SECONDS));
      s.kill();
      back.countDown(); // the handler ends while the server is down: its ack fails, and is sent again
      Thread.sleep(300); // the fault: the server down a while
      s.start();
      for (long start = System.nanoTime(); w.acked() == 0 && System.nanoTime() - start < 20_000_000_000L; ) {
        Thread.sleep(20); // a poll of the worker's counters
      }
      w.close();
      assertEquals(List.of(1L, 1), List.of(w.acked(), runs.get()));
      assertThrows(DelayqException.NotFound.class, () -> c.get("acks", JobRef.id(id)));
    }
  }
}
