package dev.delayq;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

class ClientTest {
  Server server;
  Client c;

  @BeforeEach
  void start() throws Exception {
    server = new Server();
    c = Client.builder(server.url).build();
  }

  @AfterEach
  void stop() throws Exception {
    server.close();
  }

  @Test
  void enqueueReserveAckWithAResultAndEveryJobField() {
    EnqueueResult made = c.enqueue("orders", NewJob.of(Map.of("order", 42)).key("order-42").headers(Map.of("v", "2"))
        .maxAttempts(3).priority(7).group("tenant-1").traceContext("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "k=v"));
    assertFalse(made.duplicate());
    EnqueueResult dup = c.enqueue("orders", NewJob.of(1).key("order-42"));
    assertTrue(dup.duplicate());
    assertEquals(made.id(), dup.id());
    JobInfo info = c.get("orders", JobRef.key("order-42"));
    assertEquals("ready", info.state());
    assertEquals(Map.of("order", 42L), Map.of("order", ((Number) ((Map<?, ?>) info.payload()).get("order")).longValue()));
    assertEquals(List.of("2", 7, "tenant-1", "k=v", 3), List.of(info.headers().get("v"), info.priority(), info.group(), info.tracestate(), info.maxAttempts()));
    List<Job> jobs = c.reserve("orders", 10, null, Duration.ofSeconds(10));
    assertEquals(1, jobs.size());
    Job job = jobs.get(0);
    assertEquals(List.of(made.id(), 1, "order-42"), List.of(job.id(), job.attempt(), job.key()));
    c.touch("orders", job.receipt(), Duration.ofSeconds(20), 0.5);
    assertEquals("0.5", String.valueOf(c.get("orders", JobRef.id(made.id())).progress()));
    c.setConfig("orders", Map.of("keep_completed_ms", 3_600_000));
    c.ack("orders", job.receipt(), Map.of("paid", 1999));
    JobInfo done = c.get("orders", JobRef.id(made.id()));
    assertEquals("completed", done.state());
    assertEquals("{\"paid\":1999}", Json.write(done.result()));
    assertTrue(done.completedAt() > 0);
    assertThrows(DelayqException.NotFound.class, () -> c.ack("orders", job.receipt(), null));
    Map<String, Object> stats = c.stats("orders");
    assertEquals(1L, ((Number) stats.get("completed")).longValue());
  }

  @Test
  void binaryPayloadsBatchesListingsDeadLettersAndSchedules() {
    byte[] bin = {0, (byte) 255, 1};
    List<EnqueueResult> made = c.enqueueBatch("b", List.of(NewJob.of(bin), NewJob.of(new Json.Raw("{\"as\":\"written\", \"x\":1.50}")),
        NewJob.of("later").delay(Duration.ofHours(1))));
    assertEquals(3, made.size());
    assertArrayEquals(bin, (byte[]) c.get("b", JobRef.id(made.get(0).id())).payload());
    assertEquals("{\"as\":\"written\",\"x\":1.50}", Json.write(c.get("b", JobRef.id(made.get(1).id())).payload()));
    List<Job> jobs = c.reserve("b", 10, null, null);
    assertEquals(2, jobs.size());
    BatchResult r = c.nackBatch("b", List.of(jobs.get(0).receipt(), jobs.get(1).receipt(), "forged"), null, "no", true);
    assertEquals(2, r.done());
    assertEquals(1, r.failed().size());
    assertEquals("forged", r.failed().get(0).receipt());
    assertTrue(r.failed().get(0) instanceof DelayqException.InvalidArgument);
    List<JobInfo> dead = c.dead("b", 10);
    assertEquals(2, dead.size());
    assertEquals("no", dead.get(0).lastError());
    assertEquals(1, c.replay("b", List.of(dead.get(0).id())));
    assertEquals(1, c.purge("b"));
    List<String> seen = new java.util.ArrayList<>();
    c.forEachJob("b", "scheduled", j -> seen.add(j.id()));
    assertEquals(List.of(made.get(2).id()), seen);
    JobInfo moved = c.reschedule("b", JobRef.id(made.get(2).id()), Duration.ofHours(2));
    assertTrue(moved.dueAt() > Instant.now().plus(Duration.ofMinutes(90)).toEpochMilli());
    c.cancel("b", JobRef.id(made.get(2).id()));
    Map<String, Object> sched = c.putSchedule("b", "nightly", Map.of("cron", "0 3 * * *", "timezone", "Europe/Berlin", "payload", Map.of("n", 1)));
    assertEquals("0 3 * * *", sched.get("cron"));
    assertEquals(1, c.schedules("b").size());
    c.pauseSchedule("b", "nightly");
    c.deleteSchedule("b", "nightly");
    DelayqException busy = assertThrows(DelayqException.Conflict.class, () -> c.deleteQueue("b", false));
    assertTrue(busy.getMessage().contains("force"), busy.getMessage());
    c.deleteQueue("b", true);
    assertTrue(c.version().containsKey("version"));
    assertTrue(c.ready());
  }

  @Test
  void theAsyncVariantsAnswerFuturesAndFailThemWithTheSameErrors() {
    EnqueueResult made = c.enqueueAsync("a", NewJob.of("x")).join();
    assertEquals("ready", c.getAsync("a", JobRef.id(made.id())).join().state());
    Job job = c.reserveAsync("a", 1, Duration.ofSeconds(1), null).join().get(0);
    c.ackAsync("a", job.receipt(), 7).join();
    CompletionException e = assertThrows(CompletionException.class, () -> c.getAsync("a", JobRef.id(made.id())).join());
    assertTrue(e.getCause() instanceof DelayqException.NotFound, e.getCause().toString());
    e = assertThrows(CompletionException.class, () -> c.enqueueAsync("", NewJob.of(1)).join());
    assertTrue(e.getCause() instanceof DelayqException.InvalidArgument);
  }

  private static void refused(Class<? extends DelayqException> kind, String naming, Executable call) {
    DelayqException e = assertThrows(kind, call);
    assertTrue(e.getMessage().contains(naming), () -> "\"" + e.getMessage() + "\" does not name " + naming);
  }

  /** Hostile and extreme input: refused with an error naming what is wrong; nothing is stored. */
  @Test
  void hostileInputIsRefusedWithAClearErrorAndStoresNothing() {
    c.enqueue("h", NewJob.of("the queue exists"));
    Class<DelayqException.InvalidArgument> bad = DelayqException.InvalidArgument.class;
    refused(bad, "queue name", () -> c.enqueue("", NewJob.of(1)));
    refused(bad, "queue", () -> c.enqueue("a b/../c", NewJob.of(1)));
    refused(bad, "not both", () -> c.enqueue("h", NewJob.of(1).delay(Duration.ofSeconds(1)).deliverAt(Instant.now())));
    refused(bad, "delay", () -> c.enqueue("h", NewJob.of(1).delay(Duration.ofMillis(Long.MAX_VALUE))));
    refused(bad, "delay", () -> c.enqueue("h", NewJob.of(1).delay(Duration.ofHours(-1))));
    refused(bad, "max_attempts", () -> c.enqueue("h", NewJob.of(1).maxAttempts(Integer.MIN_VALUE)));
    refused(bad, "priority", () -> c.enqueue("h", NewJob.of(1).priority(10)));
    refused(bad, "traceparent", () -> c.enqueue("h", NewJob.of(1).traceContext(null, "k=v")));
    refused(bad, "traceparent", () -> c.enqueue("h", NewJob.of(1).traceContext("00-xyz", null)));
    refused(bad, "JSON", () -> c.enqueue("h", NewJob.of(Double.NaN)));
    refused(bad, "JSON", () -> c.enqueue("h", NewJob.of(new Object())));
    refused(bad, "Json.Raw", () -> new Json.Raw("{"));
    refused(DelayqException.TooLarge.class, "payload", () -> c.enqueue("h", NewJob.of("x".repeat(2 << 20))));
    refused(bad, "id or its key", () -> JobRef.id(""));
    refused(bad, "id", () -> c.get("h", JobRef.id("../../etc/passwd")));
    refused(DelayqException.NotFound.class, "h", () -> c.get("h", JobRef.id("01HZZZZZZZZZZZZZZZZZZZZZZZ")));
    refused(bad, "receipt", () -> c.ack("h", "forged", null));
    refused(bad, "max", () -> c.reserve("h", 1001, null, null));
    refused(bad, "wait_ms", () -> c.reserve("h", 1, Duration.ofMillis(Long.MAX_VALUE), null));
    refused(bad, "timeout", () -> c.waitFor("h", JobRef.id("x"), Duration.ofMillis(-1)));
    refused(bad, "name", () -> c.putSchedule("h", "", Map.of("every", 60000)));
    refused(bad, "cron", () -> c.putSchedule("h", "s", Map.of("cron", "61 * * * *")));
    refused(bad, "lease_ms", () -> c.setConfig("h", Map.of("lease_ms", Long.MAX_VALUE)));
    List<Map<String, Object>> queues = c.queues();
    assertEquals(1, queues.size(), queues.toString());
    for (String url : new String[] {"ftp://x", "http://", "127.0.0.1:7070", "http://h:1/path"}) {
      refused(bad, "not http://HOST:PORT", () -> Client.builder(url).build());
    }
    refused(bad, "https:// only", () -> Client.builder("http://127.0.0.1:1").caFile(Path.of("/etc/hostname")).build());
    refused(bad, "CA file", () -> Client.builder("https://127.0.0.1:1").caFile(Path.of("/nonexistent")).build());
  }

  @Test
  void aWrongTokenIsUnauthenticatedAndTheTokenIsNeverPrinted() throws Exception {
    try (Server guarded = new Server("--auth-token", "s3cret-token-value")) {
      DelayqException e = assertThrows(DelayqException.Unauthenticated.class,
          () -> Client.builder(guarded.url).token("wrong-token-value").build().stats("q"));
      assertFalse(e.getMessage().contains("token-value"), e.getMessage());
      Client.builder(guarded.url).token("s3cret-token-value").build().enqueue("q", NewJob.of(1));
    }
  }

  @Test
  void aServerThatIsNotThereIsUnavailableWithTheNetworkErrorAsItsCause() {
    Client gone = Client.builder("http://127.0.0.1:1").timeout(Duration.ofSeconds(2)).build();
    DelayqException e = assertThrows(DelayqException.Unavailable.class, () -> gone.stats("q"));
    assertEquals(0, e.status());
    assertTrue(e.getCause() != null);
    assertFalse(gone.ready());
  }

  @Test
  void theCodecRefusesWhatJsonRefusesAndWritesNumbersDigitForDigit() {
    for (String bad : new String[] {"", "{", "[1,]", "01", "1.", "\"\\x\"", "[1] 2", "nul", "\"\u0001\""}) {
      assertThrows(IllegalArgumentException.class, () -> Json.parse(bad), bad);
    }
    String deep = "[".repeat(600) + "]".repeat(600);
    assertThrows(IllegalArgumentException.class, () -> Json.parse(deep));
    String exact = "{\"big\":123456789012345678901234567890,\"e\":-1.5e-300,\"s\":\"é\\n\\u0000\",\"l\":[true,false,null]}";
    assertEquals(exact.replace("\\u0000", "\\u0000"), Json.write(Json.parse(exact)));
    assertEquals(Long.MAX_VALUE, ((Number) Json.parse(String.valueOf(Long.MAX_VALUE))).longValue());
    assertNull(Json.parse("null"));
    assertEquals("{\"a\":2}", Json.write(Json.parse("{\"a\":1,\"a\":2}")), "a key twice keeps its last value");
  }
}
