package dev.delayq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class WaitTest {
  private static JobInfo answer(CompletableFuture<JobInfo> f) throws Exception {
    return f.get(30, TimeUnit.SECONDS); // a guard against a hang, not a synchronisation
  }

  @Test
  void aWaitAnswersAtTheAckWithItsResultThoughNothingIsKept() throws Exception {
    try (Server s = new Server()) {
      Client c = Client.builder(s.url).build();
      EnqueueResult made = c.enqueue("w", NewJob.of(Map.of("order", 7)).key("order-7"));
      CompletableFuture<JobInfo> byId = c.waitForAsync("w", JobRef.id(made.id()), Duration.ofSeconds(30));
      CompletableFuture<JobInfo> byKey = c.waitForAsync("w", JobRef.key("order-7"), Duration.ofSeconds(30));
      Metrics.awaitOpenWaits(s.url, 2);
      Job job = c.reserve("w", 1, null, null).get(0);
      c.ack("w", job.receipt(), Map.of("paid", 1999));
      for (CompletableFuture<JobInfo> f : List.of(byId, byKey)) {
        JobInfo o = answer(f);
        assertEquals(List.of(made.id(), "completed", "{\"paid\":1999}"), List.of(o.id(), o.state(), Json.write(o.result())));
      }
    }
  }

  @Test
  void aWaitAnswersDeadCancelledOrTheJobAsItIsAtItsTimeout() throws Exception {
    try (Server s = new Server()) {
      Client c = Client.builder(s.url).build();
      EnqueueResult later = c.enqueue("w2", NewJob.of("later").delay(Duration.ofHours(1)));
      EnqueueResult doomed = c.enqueue("w2", NewJob.of("doomed").maxAttempts(1));
      CompletableFuture<JobInfo> cancelled = c.waitForAsync("w2", JobRef.id(later.id()), Duration.ofSeconds(30));
      CompletableFuture<JobInfo> dead = c.waitForAsync("w2", JobRef.id(doomed.id()), Duration.ofSeconds(30));
      Metrics.awaitOpenWaits(s.url, 2);
      c.cancel("w2", JobRef.id(later.id()));
      c.nack("w2", c.reserve("w2", 1, null, null).get(0).receipt(), null, "card declined", false);
      JobInfo o = answer(cancelled);
      assertEquals(List.of("cancelled", "later"), List.of(o.state(), o.payload()));
      o = answer(dead);
      assertEquals(List.of("dead", "card declined"), List.of(o.state(), o.lastError()));
      EnqueueResult still = c.enqueue("w2", NewJob.of("still").delay(Duration.ofHours(1)));
      long start = System.nanoTime();
      o = c.waitFor("w2", JobRef.id(still.id()), Duration.ofMillis(300));
      assertEquals("scheduled", o.state());
      assertFalse(o.isFinal());
      assertTrue(System.nanoTime() - start >= 299_000_000L);
      assertThrows(DelayqException.NotFound.class, () -> c.waitFor("w2", JobRef.id("01HZZZZZZZZZZZZZZZZZZZZZZZ"), Duration.ofSeconds(1)));
    }
  }

  /** Many waits while their jobs are acked, nacked and cancelled at once: each its own outcome. */
  @Test
  void manyWaitsWhileTheirJobsEndEachGetTheirOwnOutcome() throws Exception {
    try (Server s = new Server()) {
      Client c = Client.builder(s.url).build();
      int n = 30;
      List<String> ids = new ArrayList<>();
      List<CompletableFuture<JobInfo>> waits = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        ids.add(c.enqueue("w4", NewJob.of(i).maxAttempts(1)).id());
        waits.add(c.waitForAsync("w4", JobRef.id(ids.get(i)), Duration.ofSeconds(30)));
      }
      Metrics.awaitOpenWaits(s.url, n);
      List<CompletableFuture<?>> ends = new ArrayList<>();
      for (int i = 0; i < n; i += 3) {
        String id = ids.get(i);
        ends.add(CompletableFuture.runAsync(() -> c.cancel("w4", JobRef.id(id))));
      }
      CompletableFuture.allOf(ends.toArray(new CompletableFuture<?>[0])).get(30, TimeUnit.SECONDS);
      for (Job job : c.reserve("w4", n, null, null)) {
        long i = ((Number) job.payload()).longValue();
        ends.add(i % 2 == 0 ? c.ackAsync("w4", job.receipt(), i) : c.nackAsync("w4", job.receipt(), null, "odd", false));
      }
      CompletableFuture.allOf(ends.toArray(new CompletableFuture<?>[0])).get(30, TimeUnit.SECONDS);
      for (int i = 0; i < n; i++) {
        JobInfo o = answer(waits.get(i));
        String want = i % 3 == 0 ? "cancelled" : i % 2 == 0 ? "completed" : "dead";
        assertEquals(want, o.state(), "job " + i);
        if (want.equals("completed")) assertEquals(String.valueOf(i), Json.write(o.result()));
      }
    }
  }

  /** kill -9 under a wait: the client asks the server again once it is back, and gets the outcome. */
  @Test
  void aWaitOutlivesAServerKilledAndStartedAgain() throws Exception {
    try (Server s = new Server("--durability", "sync")) {
      Client c = Client.builder(s.url).build();
      EnqueueResult made = c.enqueue("w5", NewJob.of("x"));
      Job job = c.reserve("w5", 1, null, Duration.ofMinutes(10)).get(0);
      CompletableFuture<JobInfo> waited = c.waitForAsync("w5", JobRef.id(made.id()), Duration.ofSeconds(30));
      Metrics.awaitOpenWaits(s.url, 1);
      s.kill();
      s.start();
      Metrics.awaitOpenWaits(s.url, 1); // the client asked the new server again
      c.ack("w5", job.receipt(), "after the restart");
      JobInfo o = answer(waited);
      assertEquals(List.of("completed", "after the restart"), List.of(o.state(), o.result()));
    }
  }

  /**
   * A stand-in for a reverse proxy (docs/security.md) in front of a delayq that restarts: 502 twice,
   * then the job, completed. A 502 or 504 was a bare DelayqException: a wait gave up at once, and a
   * worker's ack was not sent again.
   */
  @Test
  void aProxysBadGatewayIsUnavailableAndAWaitAsksAgain() throws Exception {
    java.util.concurrent.atomic.AtomicInteger asked = new java.util.concurrent.atomic.AtomicInteger();
    com.sun.net.httpserver.HttpServer proxy = com.sun.net.httpserver.HttpServer.create(
        new java.net.InetSocketAddress(java.net.InetAddress.getLoopbackAddress(), 0), 0);
    proxy.createContext("/", exchange -> {
      int n = asked.incrementAndGet();
      byte[] body;
      int status;
      if (exchange.getRequestMethod().equals("POST")) {
        status = 504;
        body = new byte[0];
      } else if (n <= 2) {
        status = 502;
        body = "<html><title>502 Bad Gateway</title></html>".getBytes(java.nio.charset.StandardCharsets.UTF_8);
      } else {
        status = 200;
        body = "{\"id\":\"01HZZZZZZZZZZZZZZZZZZZZZZZ\",\"queue\":\"p\",\"state\":\"completed\",\"payload\":1,\"result\":7}"
            .getBytes(java.nio.charset.StandardCharsets.UTF_8);
      }
      exchange.sendResponseHeaders(status, body.length == 0 ? -1 : body.length);
      exchange.getResponseBody().write(body);
      exchange.close();
    });
    proxy.start();
    try {
      Client c = Client.builder("http://127.0.0.1:" + proxy.getAddress().getPort()).build();
      JobInfo o = c.waitFor("p", JobRef.id("01HZZZZZZZZZZZZZZZZZZZZZZZ"), Duration.ofSeconds(30));
      assertEquals(List.of("completed", 7L, 3), List.of(o.state(), ((Number) o.result()).longValue(), asked.get()));
      DelayqException.Unavailable e = assertThrows(DelayqException.Unavailable.class, () -> c.ack("p", "a-receipt", null));
      assertEquals(504, e.status());
    } finally {
      proxy.stop(0);
    }
  }
}
