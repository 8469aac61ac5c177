package dev.delayq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class WorkerTest {
  @Test
  void acksWithTheResultNacksExceptionsAndReportsAResultItCannotKeep() throws Exception {
    try (Server s = new Server()) {
      Client c = Client.builder(s.url).build();
      c.setConfig("w", Map.of("keep_completed_ms", 3_600_000));
      Map<String, String> ids = new HashMap<>();
      List<String> kinds = List.of("ok", "fail", "crash", "huge", "nulls", "throwing", "overflow");
      for (String what : kinds) ids.put(what, c.enqueue("w", NewJob.of(what).maxAttempts(1)).id());
      List<String> reported = Collections.synchronizedList(new ArrayList<>());
      AtomicInteger handled = new AtomicInteger();
      Worker[] w = new Worker[1];
      w[0] = Worker.builder(c, "w", job -> {
        if (handled.incrementAndGet() == kinds.size()) w[0].stop();
        switch ((String) job.payload()) {
          case "fail" -> throw new IllegalStateException("card declined");
          case "crash" -> throw new ArithmeticException("/ by zero");
          case "huge" -> {
            return "x".repeat(Worker.MAX_RESULT_BYTES);
          }
          case "nulls" -> { // the codec's List.of once threw on the null, and the worker stopped
            return new Object[] {"a", null};
          }
          case "throwing" -> { // a value whose own code throws while it is written
            return new java.util.AbstractList<Object>() {
              @Override
              public Object get(int i) {
                throw new java.util.ConcurrentModificationException("changed while written");
              }

              @Override
              public int size() {
                return 1;
              }
            };
          }
          case "overflow" -> throw new StackOverflowError(); // one handler's recursion: not the worker's end
          default -> {
            return Map.of("paid", 1999);
          }
        }
      }).poll(Duration.ofMillis(200)).onError((job, e) -> {
        reported.add(String.valueOf(e.getMessage()));
        if ("IllegalStateException: card declined".equals(e.getClass().getSimpleName() + ": " + e.getMessage())) {
          throw new IllegalStateException("onError itself fails"); // counted, and the worker goes on
        }
      }).build();
      w[0].run();
      assertEquals(List.of("completed", "{\"paid\":1999}"), List.of(c.get("w", JobRef.id(ids.get("ok"))).state(),
          Json.write(c.get("w", JobRef.id(ids.get("ok"))).result())));
      JobInfo fail = c.get("w", JobRef.id(ids.get("fail")));
      assertEquals(List.of("dead", "IllegalStateException: card declined"), List.of(fail.state(), fail.lastError()));
      assertEquals("ArithmeticException: / by zero", c.get("w", JobRef.id(ids.get("crash"))).lastError());
      JobInfo huge = c.get("w", JobRef.id(ids.get("huge")));
      assertEquals("completed", huge.state());
      assertNull(huge.result());
      assertEquals("[\"a\",null]", Json.write(c.get("w", JobRef.id(ids.get("nulls"))).result()));
      JobInfo throwing = c.get("w", JobRef.id(ids.get("throwing")));
      assertEquals("completed", throwing.state());
      assertNull(throwing.result());
      JobInfo overflow = c.get("w", JobRef.id(ids.get("overflow")));
      assertEquals(List.of("dead", "StackOverflowError: null"), List.of(overflow.state(), overflow.lastError()));
      assertNull(w[0].failure());
      assertEquals(List.of(4L, 3L, 3L), List.of(w[0].acked(), w[0].nacked(), w[0].errors()));
      assertEquals(5, reported.size(), reported.toString());
      assertTrue(String.join("|", reported).contains("at most 65536 are kept"), reported.toString());
    }
  }

  /** A handler that restores an interrupt leaves it on the pool thread: the worker once took it for a stop at the next outage. */
  @Test
  void anInterruptAHandlerLeavesDoesNotStopTheWorkerAtTheNextOutage() throws Exception {
    try (Server s = new Server("--durability", "sync")) {
      Client c = Client.builder(s.url).timeout(Duration.ofSeconds(3)).build();
      c.enqueue("i", NewJob.of("first"));
      Set<Object> seen = ConcurrentHashMap.newKeySet();
      CountDownLatch first = new CountDownLatch(1);
      CountDownLatch second = new CountDownLatch(1);
      Worker w = Worker.builder(c, "i", job -> {
        seen.add(job.payload());
        Thread.currentThread().interrupt(); // as `catch (InterruptedException e)` is taught to do
        if ("first".equals(job.payload())) first.countDown();
        else second.countDown();
        return null;
      }).poll(Duration.ofMillis(200)).start();
      assertTrue(first.await(30, TimeUnit.SECONDS));
      Metrics.awaitDrained(c, "i");
      s.kill();
      s.start();
      c.enqueue("i", NewJob.of("second"));
      assertTrue(second.await(30, TimeUnit.SECONDS), "the worker went on after the outage: " + w.failure());
      assertTrue(!w.stopping(), "not stopped by an interrupt it did not cause");
      w.close();
      assertEquals(Set.of("first", "second"), seen);
    }
  }

  /** A server that hangs holds close() for poll and a second at most, not the client's timeout (a hostile try saw 26 s). */
  @Test
  void closeIsNotHeldByAServerThatHangs() throws Exception {
    try (Server s = new Server()) {
      Client c = Client.builder(s.url).build(); // the default timeout: 30 s
      c.enqueue("h", NewJob.of(1));
      Worker w = Worker.builder(c, "h", job -> null).poll(Duration.ofSeconds(1)).start();
      Metrics.awaitDrained(c, "h"); // acked: from now on the worker only reserves
      s.hang(true);
      long started = System.nanoTime();
      w.close();
      long tookMs = (System.nanoTime() - started) / 1_000_000;
      assertTrue(tookMs < 5_000, "close() took " + tookMs + " ms; poll (1 s) and a second at most");
    }
  }

  /** close() takes no new job but lets the running handlers finish, and settles them. */
  @Test
  void closeLetsTheRunningHandlersFinishOnTheCallersExecutorAndSettlesThem() throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(4);
    try (Server s = new Server()) {
      Client c = Client.builder(s.url).build();
      for (int i = 0; i < 6; i++) c.enqueue("g", NewJob.of(i));
      CountDownLatch started = new CountDownLatch(4);
      CountDownLatch release = new CountDownLatch(1);
      Worker w = Worker.builder(c, "g", job -> {
        started.countDown();
        release.await();
        return null;
      }).concurrency(4).poll(Duration.ofMillis(200)).executor(pool).start();
      assertTrue(started.await(30, TimeUnit.SECONDS));
      w.stop();
      release.countDown();
      w.close();
      Map<String, Object> stats = c.stats("g");
      assertEquals(List.of(4L, 2L, 0L), List.of(w.acked(), ((Number) stats.get("ready")).longValue(),
          ((Number) stats.get("reserved")).longValue()));
    } finally {
      pool.shutdownNow();
    }
  }

  /** A handler that outlasts its lease keeps the job: the worker touches it every third of the lease. */
  @Test
  void keepsTheLeaseOfAHandlerThatOutlastsIt() throws Exception {
    try (Server s = new Server()) {
      Client c = Client.builder(s.url).build();
      String id = c.enqueue("slow", NewJob.of(1)).id();
      Worker[] w = new Worker[1];
      w[0] = Worker.builder(c, "slow", job -> {
        w[0].stop();
        for (int step = 0; ; step++) { // the work: until its first lease is 2 s over
          w[0].progress(job, step);
          JobInfo info = c.get("slow", JobRef.id(job.id()));
          if (!info.state().equals("reserved") || info.attempt() != 1) throw new IllegalStateException("the job went " + info.state());
          if (System.currentTimeMillis() > job.leaseDeadline() + 2000) return "outlasted";
          Thread.sleep(100); // the handler's work, not a synchronisation
        }
      }).lease(Duration.ofSeconds(1)).poll(Duration.ofMillis(200)).build();
      w[0].run();
      assertEquals(List.of(1L, 0L), List.of(w[0].acked(), w[0].nacked()));
      assertThrows(DelayqException.NotFound.class, () -> c.get("slow", JobRef.id(id)));
    }
  }

  @Test
  void stopsOnARefusalNoRetryMendsAndRefusesBadOptions() throws Exception {
    try (Server s = new Server("--auth-token", "right")) {
      Client wrong = Client.builder(s.url).token("wrong").build();
      Worker w = Worker.builder(wrong, "q", job -> null).concurrency(3).build();
      assertThrows(DelayqException.Unauthenticated.class, w::run);
      Client c = Client.builder(s.url).token("right").build();
      assertThrows(DelayqException.InvalidArgument.class, () -> Worker.builder(c, "q", job -> null).concurrency(0).build());
      assertThrows(DelayqException.InvalidArgument.class, () -> Worker.builder(c, "q", job -> null).concurrency(1001).build());
      assertThrows(DelayqException.InvalidArgument.class, () -> Worker.builder(c, "q", job -> null).lease(Duration.ofMillis(1)).build());
      assertThrows(DelayqException.InvalidArgument.class, () -> Worker.builder(c, "", job -> null).build());
      assertThrows(DelayqException.InvalidArgument.class, () -> Worker.builder(c, "q", null).build());
    }
  }

  /** Producers, a worker and administration at once: every job is handled, none twice. */
  @Test
  void concurrentProducersAWorkerAndAdministrationLoseAndRepeatNothing() throws Exception {
    try (Server s = new Server()) {
      Client c = Client.builder(s.url).build();
      Map<String, Integer> handled = new ConcurrentHashMap<>();
      Set<String> wanted = ConcurrentHashMap.newKeySet();
      Worker w = Worker.builder(c, "mixed", job -> {
        handled.merge(job.id(), 1, Integer::sum);
        return job.attempt();
      }).concurrency(8).poll(Duration.ofMillis(200)).start();
      ExecutorService producers = Executors.newFixedThreadPool(5);
      List<java.util.concurrent.Future<?>> done = new ArrayList<>();
      for (int p = 0; p < 4; p++) {
        int producer = p;
        done.add(producers.submit(() -> {
          for (int i = 0; i < 50; i++) { // every fifth repeats the last key: a duplicate
            String key = "p" + producer + "-" + (i - i % 5 / 4);
            wanted.add(c.enqueue("mixed", NewJob.of(i).key(key).delay(Duration.ofMillis(i % 3))).id());
          }
        }));
      }
      done.add(producers.submit(() -> { // administration meanwhile, and requests that fail
        for (int i = 0; i < 20; i++) {
          c.pause("mixed");
          c.resume("mixed");
          c.setConfig("mixed", Map.of("max_attempts", 3 + i % 3));
          c.stats("mixed");
          c.jobs("mixed", "ready", 10, null);
          assertThrows(DelayqException.InvalidArgument.class, () -> c.ack("mixed", "forged", null));
        }
      }));
      for (var f : done) f.get(60, TimeUnit.SECONDS);
      producers.shutdown();
      c.resume("mixed");
      Metrics.awaitDrained(c, "mixed");
      w.close();
      assertEquals(wanted, handled.keySet());
      handled.forEach((id, n) -> assertEquals(1, n, "job " + id));
    }
  }

  /** kill -9 of the server under a worker: it backs off, goes on once it is back; every job is handled. */
  @Test
  void backsOffThroughAServerKilledAndStartedAgain() throws Exception {
    try (Server s = new Server("--durability", "sync")) {
      Client c = Client.builder(s.url).timeout(Duration.ofSeconds(3)).build();
      c.setConfig("k", Map.of("lease_ms", 2000));
      int jobs = 40;
      for (int i = 0; i < jobs; i++) c.enqueue("k", NewJob.of(i));
      Set<String> seen = ConcurrentHashMap.newKeySet();
      CountDownLatch half = new CountDownLatch(jobs / 2);
      Worker w = Worker.builder(c, "k", job -> {
        if (seen.add(job.id())) half.countDown();
        return null;
      }).concurrency(4).poll(Duration.ofMillis(200)).start();
      assertTrue(half.await(30, TimeUnit.SECONDS));
      s.kill();
      s.start();
      Metrics.awaitDrained(c, "k");
      w.close();
      assertEquals(jobs, seen.size());
      assertTrue(w.errors() > 0, "the server was gone a while");
    }
  }

  /**
   * A worker whose clock is 20 s behind the server's (a stand-in proxy adds 20 s to each delivery's
   * leaseDeadline, which is what such a worker reads). It took the lease for 21 s and touched a 1 s
   * lease after 7 s: the job was handed out again while its handler ran. The queue's lease_ms is
   * what a worker without lease(d) goes by.
   */
  @Test
  @SuppressWarnings("unchecked")
  void aWorkerWhoseClockIsBehindTheServersKeepsTheLease() throws Exception {
    try (Server s = new Server()) {
      Client c = Client.builder(s.url).build();
      c.setConfig("skew", Map.of("lease_ms", 1000));
      String id = c.enqueue("skew", NewJob.of(1)).id();
      java.net.http.HttpClient http = java.net.http.HttpClient.newHttpClient();
      com.sun.net.httpserver.HttpServer proxy = com.sun.net.httpserver.HttpServer.create(
          new java.net.InetSocketAddress(java.net.InetAddress.getLoopbackAddress(), 0), 0);
      proxy.setExecutor(Executors.newCachedThreadPool());
      proxy.createContext("/", exchange -> {
        try {
          byte[] sent = exchange.getRequestBody().readAllBytes();
          java.net.http.HttpRequest.Builder forward = java.net.http.HttpRequest.newBuilder(java.net.URI.create(s.url + exchange.getRequestURI()))
              .method(exchange.getRequestMethod(), java.net.http.HttpRequest.BodyPublishers.ofByteArray(sent));
          String type = exchange.getRequestHeaders().getFirst("Content-Type");
          if (type != null) forward.header("Content-Type", type);
          java.net.http.HttpResponse<String> answer = http.send(forward.build(), java.net.http.HttpResponse.BodyHandlers.ofString());
          String body = answer.body();
          if (exchange.getRequestURI().getPath().endsWith("/reserve") && answer.statusCode() == 200) {
            Map<String, Object> parsed = (Map<String, Object>) Json.parse(body);
            for (Object j : (List<Object>) parsed.get("jobs")) {
              Map<String, Object> job = (Map<String, Object>) j;
              job.put("lease_deadline", ((Number) job.get("lease_deadline")).longValue() + 20_000);
            }
            body = Json.write(parsed);
          }
          byte[] out = body.getBytes(java.nio.charset.StandardCharsets.UTF_8);
          exchange.getResponseHeaders().set("Content-Type", "application/json");
          exchange.sendResponseHeaders(answer.statusCode(), out.length == 0 ? -1 : out.length);
          exchange.getResponseBody().write(out);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        } finally {
          exchange.close();
        }
      });
      proxy.start();
      try {
        Client skewed = Client.builder("http://127.0.0.1:" + proxy.getAddress().getPort()).build();
        Worker[] w = new Worker[1];
        w[0] = Worker.builder(skewed, "skew", job -> {
          Thread.sleep(2500); // the work: more than two leases
          w[0].stop();
          return "done";
        }).concurrency(2).poll(Duration.ofMillis(200)).build();
        w[0].run();
        assertEquals(List.of(1L, 0L), List.of(w[0].acked(), w[0].redelivered()));
        assertThrows(DelayqException.NotFound.class, () -> c.get("skew", JobRef.id(id)));
      } finally {
        proxy.stop(0);
      }
    }
  }
}
