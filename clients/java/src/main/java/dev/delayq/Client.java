package dev.delayq;

import java.io.EOFException;
import java.net.ConnectException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.Consumer;
import javax.net.ssl.SSLException;

/**
 * A connection to a delayq server (docs/http-api.md): every operation of the API as a method, and
 * the main ones as {@code …Async} variants answering a {@link CompletableFuture}. Safe to share
 * between threads. Errors are {@link DelayqException}s (unchecked): {@code NotFound},
 * {@code LeaseExpired}, ...
 *
 * <pre>{@code
 * Client c = Client.builder("http://127.0.0.1:7070").token(System.getenv("DELAYQ_TOKEN")).build();
 * EnqueueResult job = c.enqueue("orders", NewJob.of(Map.of("orderId", 42)).delay(Duration.ofMinutes(30)));
 * JobInfo outcome = c.waitFor("orders", JobRef.id(job.id()), Duration.ofMinutes(5));
 * }</pre>
 */
public final class Client {
  /** The longest wait one request holds (a wait longer than it is made of waits of it). */
  public static final long WAIT_MAX_MS = 60_000;

  private final String base;
  private final String token;
  private final Duration timeout;
  private final HttpClient http;

  private Client(Builder b) {
    need(b.url, "the url");
    need(b.timeout, "the timeout");
    if (b.token != null && b.token.chars().anyMatch(ch -> ch < 0x21 || ch > 0x7e)) {
      throw new DelayqException.InvalidArgument("the token holds a space, a line end or a character outside printable ASCII "
          + "(read from a file with its newline?): give the token alone");
    }
    URI uri;
    try {
      uri = URI.create(b.url);
    } catch (IllegalArgumentException e) {
      throw new DelayqException.InvalidArgument("url \"" + b.url + "\" is not http://HOST:PORT or https://HOST:PORT");
    }
    String scheme = uri.getScheme();
    if (!("http".equals(scheme) || "https".equals(scheme)) || uri.getHost() == null
        || (uri.getRawPath() != null && !uri.getRawPath().isEmpty() && !uri.getRawPath().equals("/"))) {
      throw new DelayqException.InvalidArgument("url \"" + b.url + "\" is not http://HOST:PORT or https://HOST:PORT");
    }
    // Past a day, timeout + wait overflowed a long of nanoseconds (an ArithmeticException from every call).
    if (b.timeout.isNegative() || b.timeout.isZero() || b.timeout.compareTo(Duration.ofDays(1)) > 0) {
      throw new DelayqException.InvalidArgument("the timeout is " + b.timeout + "; give a positive one up to 1 day (PT24H)");
    }
    boolean tls = b.caFile != null || b.certFile != null || b.keyFile != null;
    if (tls && !"https".equals(scheme)) {
      throw new DelayqException.InvalidArgument("caFile and clientCert are for https:// only, not \"" + b.url + "\"");
    }
    if (b.keyFile != null && b.certFile == null) {
      throw new DelayqException.InvalidArgument("a client key was given without its certificate: give both, or neither");
    }
    this.base = scheme + "://" + uri.getRawAuthority();
    this.token = b.token;
    this.timeout = b.timeout;
    HttpClient.Builder h = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(b.timeout);
    if ("https".equals(scheme)) h.sslContext(Tls.context(b.caFile, b.certFile, b.keyFile));
    if (b.executor != null) h.executor(b.executor);
    this.http = h.build();
  }

  /** A builder of a client of the server at url ("http://127.0.0.1:7070" or https://). */
  public static Builder builder(String url) {
    return new Builder(url);
  }

  /** Options of a client; build() checks them and the TLS files, naming what is wrong. */
  public static final class Builder {
    private final String url;
    private String token;
    private Duration timeout = Duration.ofSeconds(30);
    private Path caFile;
    private Path certFile;
    private Path keyFile;
    private java.util.concurrent.Executor executor;

    private Builder(String url) {
      this.url = url;
    }

    /** The server's bearer token (its --auth-token); null: none. */
    public Builder token(String t) {
      this.token = t;
      return this;
    }

    /** Connecting and each answer (default 30 s); a waiting reserve or wait gets its wait on top. */
    public Builder timeout(Duration d) {
      this.timeout = d;
      return this;
    }

    /** Trusts the CAs of this PEM file instead of the JDK's (https:// only). */
    public Builder caFile(Path p) {
      this.caFile = p;
      return this;
    }

    /** A client certificate (PEM) and its unencrypted PKCS#8 key (null: in the certificate file). */
    public Builder clientCert(Path cert, Path key) {
      this.certFile = cert;
      this.keyFile = key;
      return this;
    }

    /** The executor of the HTTP client's work (default: the JDK's). */
    public Builder executor(java.util.concurrent.Executor e) {
      this.executor = e;
      return this;
    }

    public Client build() {
      return new Client(this);
    }
  }

  /** The server's address, scheme://host:port. */
  public String url() {
    return base;
  }

  Duration timeout() {
    return timeout;
  }

  // --- transport ---

  private static String enc(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8).replace("+", "%20");
  }

  /** A refusal naming the argument that is null, before anything is sent. */
  static <T> T need(T value, String what) {
    if (value == null) throw new DelayqException.InvalidArgument(what + " is null: give one");
    return value;
  }

  static String queuePath(String queue) {
    if (queue == null || queue.isEmpty()) throw new DelayqException.InvalidArgument("the queue name is empty: give a queue's name");
    return "/v1/queues/" + enc(queue);
  }

  private static String jobPath(String queue, JobRef ref, Map<String, Object> query) {
    need(ref, "the job's reference (JobRef)");
    if (ref.id() != null) return queuePath(queue) + "/jobs/" + enc(ref.id());
    query.put("key", ref.key());
    return queuePath(queue) + "/jobs";
  }

  static void when(Map<String, Object> body, Duration delay, Instant at) {
    if (delay != null && at != null) throw new DelayqException.InvalidArgument("give a delay or a deliverAt, not both");
    if (delay != null) body.put("delay_ms", ms(delay));
    if (at != null) body.put("deliver_at", ms(at));
  }

  /**
   * Milliseconds of a duration, saturated at the ends of a long (Duration.toMillis throws past
   * them): the server then refuses it as out of range, naming the field.
   */
  static long ms(Duration d) {
    try {
      return d.toMillis();
    } catch (ArithmeticException beyond) {
      return d.isNegative() ? Long.MIN_VALUE : Long.MAX_VALUE;
    }
  }

  static long ms(Instant at) {
    try {
      return at.toEpochMilli();
    } catch (ArithmeticException beyond) {
      return at.isBefore(Instant.EPOCH) ? Long.MIN_VALUE : Long.MAX_VALUE;
    }
  }

  /** One request; its answer's JSON (null when empty). wait: how long the server may hold it. */
  CompletableFuture<Object> callAsync(String method, String path, Map<String, Object> query, Object body, long waitMs) {
    String target = base + path;
    if (query != null && !query.isEmpty()) {
      StringJoiner q = new StringJoiner("&", "?", "");
      query.forEach((k, v) -> q.add(enc(k) + "=" + enc(String.valueOf(v))));
      target += q;
    }
    HttpRequest.BodyPublisher publisher;
    try {
      publisher = body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(Json.write(body));
    } catch (IllegalArgumentException e) {
      return CompletableFuture.failedFuture(new DelayqException.InvalidArgument("the request cannot be sent as JSON: " + e.getMessage()));
    }
    HttpRequest.Builder r = HttpRequest.newBuilder(URI.create(target)).method(method, publisher)
        .timeout(timeout.plusMillis(Math.max(0, Math.min(waitMs, WAIT_MAX_MS)))).header("Accept", "application/json");
    if (!method.equals("GET") && !method.equals("DELETE")) r.header("Content-Type", "application/json");
    if (token != null && !token.isEmpty()) r.header("Authorization", "Bearer " + token);
    HttpRequest request = r.build();
    return send(request, true).thenApply(this::answer);
  }

  private CompletableFuture<HttpResponse<String>> send(HttpRequest request, boolean again) {
    return http.sendAsync(request, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8)).handle((res, error) -> {
      if (error == null) return CompletableFuture.completedFuture(res);
      Throwable cause = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
      // A kept-alive connection the server closed while idle fails before any answer: sent again once.
      if (again && (cause instanceof EOFException || String.valueOf(cause.getMessage()).contains("received no bytes"))) {
        return send(request, false);
      }
      CompletableFuture<HttpResponse<String>> failed = new CompletableFuture<>();
      failed.completeExceptionally(unavailable(cause));
      return failed;
    }).thenCompose(f -> f);
  }

  private DelayqException unavailable(Throwable cause) {
    String why;
    if (cause instanceof HttpConnectTimeoutException || cause instanceof ConnectException) {
      why = "cannot reach " + base;
    } else if (cause instanceof HttpTimeoutException) {
      why = "no answer from " + base + " in time";
    } else if (cause instanceof SSLException) {
      why = "the TLS handshake with " + base + " failed (check caFile, clientCert and the server's certificate)";
    } else {
      why = base + " closed the connection";
    }
    return new DelayqException.Unavailable("unavailable", 0, why + ": " + cause, null, cause);
  }

  private Object answer(HttpResponse<String> res) {
    String text = res.body();
    Object value = null;
    try {
      value = text == null || text.isEmpty() ? null : Json.parse(text);
    } catch (IllegalArgumentException notJson) {
      // an error page of a proxy, say: answered by status below
    }
    int status = res.statusCode();
    if (status >= 200 && status < 300) return value;
    if (value instanceof Map<?, ?> m && m.get("error") instanceof Map<?, ?> e) {
      Map<String, Object> err = Values.object(e);
      throw DelayqException.of(status, Values.str(err, "code"), Values.str(err, "message"), null);
    }
    String shown = text == null ? "" : text.substring(0, Math.min(200, text.length()));
    throw DelayqException.of(status, null, "HTTP " + status + ": " + shown, null);
  }

  Object call(String method, String path, Map<String, Object> query, Object body, long waitMs) {
    return join(callAsync(method, path, query, body, waitMs));
  }

  static <T> T join(CompletableFuture<T> f) {
    try {
      return f.join();
    } catch (CompletionException e) {
      if (e.getCause() instanceof RuntimeException r) throw r;
      throw e;
    }
  }

  // --- jobs ---

  /** Hands in one job. */
  public EnqueueResult enqueue(String queue, NewJob job) {
    return join(enqueueAsync(queue, job));
  }

  public CompletableFuture<EnqueueResult> enqueueAsync(String queue, NewJob job) {
    return start(() -> callAsync("POST", queuePath(queue) + "/jobs", null, need(job, "the job").body(), 0)).thenApply(EnqueueResult::of);
  }

  /** Hands in up to 1000 jobs at once, all or none. */
  public List<EnqueueResult> enqueueBatch(String queue, List<NewJob> jobs) {
    List<Object> bodies = new ArrayList<>();
    for (NewJob j : need(jobs, "the list of jobs")) bodies.add(need(j, "a job of the list").body());
    Object r = call("POST", queuePath(queue) + "/jobs", null, Map.of("jobs", bodies), 0);
    return Values.list(Values.object(r), "jobs").stream().map(EnqueueResult::of).toList();
  }

  /** Reads a job. */
  public JobInfo get(String queue, JobRef ref) {
    return join(getAsync(queue, ref));
  }

  public CompletableFuture<JobInfo> getAsync(String queue, JobRef ref) {
    return start(() -> {
      Map<String, Object> query = new LinkedHashMap<>();
      return callAsync("GET", jobPath(queue, ref, query), query, null, 0);
    }).thenApply(JobInfo::of);
  }

  /**
   * Waits for the job's outcome: answers it once it is completed (its result is the one its ack
   * carried, kept for this wait even when the queue keeps no completed jobs), dead or cancelled,
   * or as it then is when timeout ends: look at {@code state} (or {@code isFinal()}). The server is
   * woken by the job's end, never polls; a timeout above 60 s is made of waits of 60 s, and a
   * server that restarts (Unavailable) or is full (Overloaded) meanwhile is asked again until the
   * timeout. NotFound when there is no such job (or it ended, not kept, before the wait began). A
   * wait by key waits for the job the key named when it began.
   */
  public JobInfo waitFor(String queue, JobRef ref, Duration timeout) {
    return join(waitForAsync(queue, ref, timeout));
  }

  public CompletableFuture<JobInfo> waitForAsync(String queue, JobRef ref, Duration timeout) {
    if (timeout == null || timeout.isNegative()) {
      return CompletableFuture.failedFuture(new DelayqException.InvalidArgument("the timeout is " + timeout + "; give 0 or more"));
    }
    // At most a century: the deadline in nanoseconds stays within a long.
    long budget = timeout.compareTo(Duration.ofDays(36_500)) > 0 ? Duration.ofDays(36_500).toNanos() : timeout.toNanos();
    long deadline = System.nanoTime() + budget;
    return start(() -> waitTurn(queue, ref, deadline, 100));
  }

  private static long msLeft(long deadline) {
    return Math.max(0, (deadline - System.nanoTime()) / 1_000_000);
  }

  private CompletableFuture<JobInfo> waitTurn(String queue, JobRef ref, long deadline, long pauseMs) {
    long waitMs = Math.min(msLeft(deadline), WAIT_MAX_MS);
    Map<String, Object> query = new LinkedHashMap<>();
    String path = jobPath(queue, ref, query);
    query.put("wait_ms", waitMs);
    return callAsync("GET", path, query, null, waitMs).thenApply(JobInfo::of).handle((job, error) -> {
      if (error != null) {
        Throwable cause = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
        boolean again = cause instanceof DelayqException.Unavailable || cause instanceof DelayqException.Overloaded;
        // Asked again after a pause until the timeout (a server starting again, or one at
        // --max-waiting), the last time without waiting (wait_ms 0 is a plain read, never a 429);
        // that last one's failure is the answer.
        if (!again || waitMs == 0) return CompletableFuture.<JobInfo>failedFuture(cause);
        long pause = Math.min(pauseMs, msLeft(deadline));
        return CompletableFuture.supplyAsync(() -> 0, CompletableFuture.delayedExecutor(pause, java.util.concurrent.TimeUnit.MILLISECONDS))
            .thenCompose(x -> waitTurn(queue, ref, deadline, Math.min(pauseMs * 2, 2000)));
      }
      if (job.isFinal() || msLeft(deadline) == 0) return CompletableFuture.completedFuture(job);
      return waitTurn(queue, JobRef.id(job.id()), deadline, 100); // by key: the job it named at first
    }).thenCompose(f -> f);
  }

  /** Deletes a scheduled, ready or dead job. NotFound when there is none; Conflict while reserved. */
  public void cancel(String queue, JobRef ref) {
    Map<String, Object> query = new LinkedHashMap<>();
    call("DELETE", jobPath(queue, ref, query), query, null, 0);
  }

  /** Moves a scheduled or ready job's due time to after delay; answers the job as it is now. */
  public JobInfo reschedule(String queue, JobRef ref, Duration delay) {
    return reschedule(queue, ref, delay, null);
  }

  /** Moves a scheduled or ready job's due time to at. */
  public JobInfo rescheduleAt(String queue, JobRef ref, Instant at) {
    return reschedule(queue, ref, null, at);
  }

  private JobInfo reschedule(String queue, JobRef ref, Duration delay, Instant at) {
    Map<String, Object> query = new LinkedHashMap<>();
    Map<String, Object> body = new LinkedHashMap<>();
    when(body, delay, at);
    if (body.isEmpty()) throw new DelayqException.InvalidArgument("give the new due time: a delay or an instant");
    return JobInfo.of(call("PATCH", jobPath(queue, ref, query), query, body, 0));
  }

  // --- consuming ---

  /** Takes up to max (1..1000) ready jobs for lease (null: the queue's), waiting up to wait (≤ 60 s). */
  public List<Job> reserve(String queue, int max, Duration wait, Duration lease) {
    return join(reserveAsync(queue, max, wait, lease));
  }

  public CompletableFuture<List<Job>> reserveAsync(String queue, int max, Duration wait, Duration lease) {
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("max", max);
    long waitMs = wait == null ? 0 : ms(wait);
    if (waitMs != 0) body.put("wait_ms", waitMs);
    if (lease != null) body.put("lease_ms", ms(lease));
    return start(() -> callAsync("POST", queuePath(queue) + "/reserve", null, body, waitMs))
        .thenApply(r -> Values.list(Values.object(r), "jobs").stream().map(Job::of).toList());
  }

  /**
   * Acknowledges a delivery: the job is done, and deleted, or kept completed with result (any JSON
   * value, up to 64 KiB; null: none) while the queue keeps completed jobs or someone waits for it.
   * LeaseExpired: the job was delivered again meanwhile.
   */
  public void ack(String queue, String receipt, Object result) {
    join(ackAsync(queue, receipt, result));
  }

  public CompletableFuture<Void> ackAsync(String queue, String receipt, Object result) {
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("receipt", need(receipt, "the receipt"));
    if (result != null) body.put("result", result);
    return start(() -> callAsync("POST", queuePath(queue) + "/ack", null, body, 0)).thenApply(r -> null);
  }

  /** One ack of a batch, with its result (null: none). */
  public record AckEntry(String receipt, Object result) {}

  /** Acknowledges up to 1000 deliveries in one request. */
  public BatchResult ackBatch(String queue, List<AckEntry> entries) {
    List<Object> items = new ArrayList<>();
    for (AckEntry e : need(entries, "the list of acks")) {
      need(e, "an ack of the list");
      if (e.result() == null) {
        items.add(e.receipt());
      } else {
        Map<String, Object> item = new LinkedHashMap<>();
        item.put("receipt", e.receipt());
        item.put("result", e.result());
        items.add(item);
      }
    }
    return BatchResult.of(call("POST", queuePath(queue) + "/ack", null, Map.of("receipts", items), 0), "acked");
  }

  private static Map<String, Object> nackBody(Duration retryIn, String error, boolean dead) {
    Map<String, Object> b = new LinkedHashMap<>();
    if (retryIn != null) b.put("retry_in_ms", ms(retryIn));
    if (error != null) b.put("error", error);
    if (dead) b.put("dead", true);
    return b;
  }

  /** Ends a delivery without success: retried after retryIn (null: the queue's back-off), or dead. */
  public NackResult nack(String queue, String receipt, Duration retryIn, String error, boolean dead) {
    return join(nackAsync(queue, receipt, retryIn, error, dead));
  }

  public CompletableFuture<NackResult> nackAsync(String queue, String receipt, Duration retryIn, String error, boolean dead) {
    Map<String, Object> body = nackBody(retryIn, error, dead);
    body.put("receipt", receipt);
    return start(() -> callAsync("POST", queuePath(queue) + "/nack", null, body, 0)).thenApply(NackResult::of);
  }

  public BatchResult nackBatch(String queue, List<String> receipts, Duration retryIn, String error, boolean dead) {
    Map<String, Object> body = nackBody(retryIn, error, dead);
    body.put("receipts", need(receipts, "the list of receipts"));
    return BatchResult.of(call("POST", queuePath(queue) + "/nack", null, body, 0), "nacked");
  }

  private static Map<String, Object> touchBody(Duration lease, Object progress) {
    Map<String, Object> b = new LinkedHashMap<>();
    if (lease != null) b.put("lease_ms", ms(lease));
    if (progress != null) b.put("progress", progress);
    return b;
  }

  /**
   * Extends a delivery's lease (null: by the queue's lease_ms); progress, any JSON value up to
   * 4 KiB, is shown on the job while this delivery holds it (null keeps the last). Answers the new
   * lease deadline (epoch ms).
   */
  public long touch(String queue, String receipt, Duration lease, Object progress) {
    return join(touchAsync(queue, receipt, lease, progress));
  }

  public CompletableFuture<Long> touchAsync(String queue, String receipt, Duration lease, Object progress) {
    Map<String, Object> body = touchBody(lease, progress);
    body.put("receipt", receipt);
    return start(() -> callAsync("POST", queuePath(queue) + "/touch", null, body, 0))
        .thenApply(r -> Values.num(Values.object(r), "lease_deadline"));
  }

  public BatchResult touchBatch(String queue, List<String> receipts, Duration lease, Object progress) {
    Map<String, Object> body = touchBody(lease, progress);
    body.put("receipts", need(receipts, "the list of receipts"));
    return BatchResult.of(call("POST", queuePath(queue) + "/touch", null, body, 0), "touched");
  }

  /** Gives back deliveries that never reached a handler: ready again at once, no attempt used. */
  public BatchResult release(String queue, List<String> receipts) {
    if (need(receipts, "the list of receipts").isEmpty()) throw new DelayqException.InvalidArgument("no receipt to release: give one or more");
    return BatchResult.of(call("POST", queuePath(queue) + "/release", null, Map.of("receipts", receipts), 0), "released");
  }

  // --- queues ---

  /** A queue's counts, counters and lateness, as the server's JSON (GET /v1/queues/{q}). */
  public Map<String, Object> stats(String queue) {
    return Values.object(call("GET", queuePath(queue), null, null, 0));
  }

  public List<Map<String, Object>> queues() {
    return Values.list(Values.object(call("GET", "/v1/queues", null, null, 0)), "queues").stream().map(Values::object).toList();
  }

  public Map<String, Object> config(String queue) {
    return Values.object(call("GET", queuePath(queue) + "/config", null, null, 0));
  }

  /** Changes the fields given (max_attempts, lease_ms, backoff, keep_completed_ms, ...); others keep theirs. */
  public Map<String, Object> setConfig(String queue, Map<String, Object> fields) {
    return Values.object(call("PUT", queuePath(queue) + "/config", null, need(fields, "the config's fields"), 0));
  }

  public void pause(String queue) {
    call("POST", queuePath(queue) + "/pause", null, null, 0);
  }

  public void resume(String queue) {
    call("POST", queuePath(queue) + "/resume", null, null, 0);
  }

  /** Deletes an empty queue (Conflict while it holds jobs), or with force its jobs too. */
  public void deleteQueue(String queue, boolean force) {
    call("DELETE", queuePath(queue), force ? Map.of("force", "true") : null, null, 0);
  }

  // --- browsing ---

  /** One page of the queue's jobs in state, at most limit (1..1000; 0 is 100) from cursor (null at first). */
  public JobPage jobs(String queue, String state, int limit, String cursor) {
    Map<String, Object> query = new LinkedHashMap<>();
    query.put("state", need(state, "the state"));
    query.put("limit", limit == 0 ? 100 : limit);
    if (cursor != null) query.put("cursor", cursor);
    return JobPage.of(call("GET", queuePath(queue) + "/jobs", query, null, 0));
  }

  /** Every job of the queue in state, a page at a time. */
  public void forEachJob(String queue, String state, Consumer<JobInfo> action) {
    String cursor = null;
    do {
      JobPage page = jobs(queue, state, 100, cursor);
      page.jobs().forEach(action);
      cursor = page.nextCursor();
    } while (cursor != null);
  }

  /** The first limit dead jobs (0 is 100), oldest death first. */
  public List<JobInfo> dead(String queue, int limit) {
    return jobs(queue, "dead", limit, null).jobs();
  }

  /** Makes dead jobs ready again (every one when ids is empty), attempts reset; answers how many. */
  public int replay(String queue, List<String> ids) {
    Map<String, Object> body = ids == null || ids.isEmpty() ? Map.of() : Map.of("ids", ids);
    return (int) Values.num(Values.object(call("POST", queuePath(queue) + "/dead/replay", null, body, 0)), "replayed");
  }

  /** Deletes every dead job of the queue; answers how many. */
  public int purge(String queue) {
    return (int) Values.num(Values.object(call("DELETE", queuePath(queue) + "/dead", null, null, 0)), "purged");
  }

  // --- recurring schedules (docs/http-api.md, "Recurring schedules") ---

  private static String schedulePath(String queue, String name) {
    if (name == null || name.isEmpty()) throw new DelayqException.InvalidArgument("the schedule's name is empty: give one");
    return queuePath(queue) + "/schedules/" + enc(name);
  }

  /** Creates or replaces a schedule: {"cron": …, "timezone": …} or {"every": ms}, with payload and job fields. */
  public Map<String, Object> putSchedule(String queue, String name, Map<String, Object> spec) {
    return Values.object(call("PUT", schedulePath(queue, name), null, need(spec, "the schedule's spec"), 0));
  }

  public Map<String, Object> schedule(String queue, String name) {
    return Values.object(call("GET", schedulePath(queue, name), null, null, 0));
  }

  public List<Map<String, Object>> schedules(String queue) {
    return Values.list(Values.object(call("GET", queuePath(queue) + "/schedules", null, null, 0)), "schedules").stream()
        .map(Values::object).toList();
  }

  public Map<String, Object> pauseSchedule(String queue, String name) {
    return Values.object(call("POST", schedulePath(queue, name) + "/pause", null, null, 0));
  }

  public Map<String, Object> resumeSchedule(String queue, String name) {
    return Values.object(call("POST", schedulePath(queue, name) + "/resume", null, null, 0));
  }

  /** Deletes a schedule; its jobs not yet due are cancelled. */
  public void deleteSchedule(String queue, String name) {
    call("DELETE", schedulePath(queue, name), null, null, 0);
  }

  // --- the service ---

  public Map<String, Object> version() {
    return Values.object(call("GET", "/v1/version", null, null, 0));
  }

  /** Whether the server's store is open and can serve. */
  public boolean ready() {
    try {
      call("GET", "/readyz", null, null, 0);
      return true;
    } catch (DelayqException e) {
      return false;
    }
  }

  /** Runs what builds a request, a refusal it throws answered as a failed future. */
  private static <T> CompletableFuture<T> start(java.util.function.Supplier<CompletableFuture<T>> request) {
    try {
      return request.get();
    } catch (DelayqException | IllegalArgumentException e) {
      return CompletableFuture.failedFuture(e instanceof DelayqException ? e : new DelayqException.InvalidArgument(e.getMessage()));
    }
  }

}
