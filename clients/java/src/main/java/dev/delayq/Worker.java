package dev.delayq;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiConsumer;

/**
 * Runs a {@link Handler} for each job of a queue, {@code concurrency} at a time, on an executor
 * the caller may pass: it reserves by long-polling, keeps each running job's lease alive (a touch
 * every third of it), acks with the handler's return value as the job's result or nacks with its
 * exception's text, and backs off (100 ms doubling to 5 s) while the server cannot be reached or
 * cannot serve. {@link #close()} (or stop()) takes no new job, lets the running handlers finish and
 * settles them. A refusal no retry mends (Unauthenticated, Forbidden, InvalidArgument: a wrong
 * token, a bad queue name) stops the worker; {@link #run()} and {@link #close()} throw it.
 *
 * <pre>{@code
 * try (Worker w = Worker.builder(client, "orders", job -> Map.of("cancelled", true)).concurrency(8).start()) {
 *   ... // until the application stops
 * }
 * }</pre>
 */
public final class Worker implements AutoCloseable {
  /** A job's work: its return value (null: none) is the job's result; an exception nacks the job. */
  @FunctionalInterface
  public interface Handler {
    Object handle(Job job) throws Exception;
  }

  /** The most JSON a result may be (the server's limit). */
  public static final int MAX_RESULT_BYTES = 65536;

  private final Client client;
  private final String queue;
  private final Handler handler;
  private final int concurrency;
  private final Duration lease;
  private final Duration poll;
  private final BiConsumer<Job, Throwable> onError;
  private final ExecutorService executor;
  private final boolean ownExecutor;
  private final ScheduledExecutorService keeper;
  private final Map<String, Running> running = new ConcurrentHashMap<>();
  private final AtomicBoolean stopping = new AtomicBoolean();
  private final AtomicBoolean started = new AtomicBoolean();
  private final AtomicReference<RuntimeException> failure = new AtomicReference<>();
  private final AtomicLong acked = new AtomicLong();
  private final AtomicLong nacked = new AtomicLong();
  private final AtomicLong errors = new AtomicLong();
  private final AtomicLong redelivered = new AtomicLong();
  private volatile Duration queueLease; // the queue's lease_ms as last read, and when (nanoTime)
  private volatile long queueLeaseReadAt;
  private static final ThreadLocal<Worker> SLOT = new ThreadLocal<>(); // the worker whose slot runs on this thread
  private final CountDownLatch done;

  private static final class Running {
    volatile String receipt;
    final Duration lease;
    volatile long nextTouchNanos;

    Running(String receipt, Duration lease) {
      this.receipt = receipt;
      this.lease = lease;
      this.nextTouchNanos = System.nanoTime() + lease.toNanos() / 3;
    }
  }

  private Worker(Builder b) {
    this.client = b.client;
    this.queue = b.queue;
    this.handler = b.handler;
    this.concurrency = b.concurrency;
    this.lease = b.lease;
    this.poll = b.poll;
    this.onError = b.onError;
    this.ownExecutor = b.executor == null;
    this.executor = ownExecutor ? Executors.newFixedThreadPool(concurrency, r -> {
      Thread t = new Thread(r, "delayq-worker");
      t.setDaemon(true);
      return t;
    }) : b.executor;
    this.keeper = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "delayq-keepalive");
      t.setDaemon(true);
      return t;
    });
    this.done = new CountDownLatch(concurrency);
  }

  public static Builder builder(Client client, String queue, Handler handler) {
    return new Builder(client, queue, handler);
  }

  /** The worker's options; build() or start() checks them, naming a bad one. */
  public static final class Builder {
    private final Client client;
    private final String queue;
    private final Handler handler;
    private int concurrency = 1;
    private Duration lease;
    private Duration poll = Duration.ofSeconds(5);
    private BiConsumer<Job, Throwable> onError;
    private ExecutorService executor;

    private Builder(Client client, String queue, Handler handler) {
      this.client = client;
      this.queue = queue;
      this.handler = handler;
    }

    /** Handlers at a time, 1..1000 (default 1). */
    public Builder concurrency(int n) {
      this.concurrency = n;
      return this;
    }

    /** Each delivery's lease, 1 s..12 h (default: the queue's lease_ms). */
    public Builder lease(Duration d) {
      this.lease = d;
      return this;
    }

    /** How long one reserve waits for a job (at most and default 5 s): close() waits for those under way. */
    public Builder poll(Duration d) {
      this.poll = d;
      return this;
    }

    /** Told of each handler's exception and each result that could not be kept (the job is acked without it). */
    public Builder onError(BiConsumer<Job, Throwable> f) {
      this.onError = f;
      return this;
    }

    /** Runs the slots on this executor (it needs concurrency threads free); the caller shuts it down. */
    public Builder executor(ExecutorService e) {
      this.executor = e;
      return this;
    }

    public Worker build() {
      Client.queuePath(queue);
      if (client == null || handler == null) throw new DelayqException.InvalidArgument("the client and the handler are needed, not null");
      if (concurrency < 1 || concurrency > 1000) throw new DelayqException.InvalidArgument("concurrency is " + concurrency + "; give 1..1000");
      if (lease != null && (lease.compareTo(Duration.ofSeconds(1)) < 0 || lease.compareTo(Duration.ofHours(12)) > 0)) {
        throw new DelayqException.InvalidArgument("the lease is " + lease + "; give 1 s..12 h, or none for the queue's");
      }
      if (poll == null || poll.isNegative() || poll.isZero() || poll.compareTo(Duration.ofSeconds(5)) > 0) poll = Duration.ofSeconds(5);
      return new Worker(this);
    }

    /** Builds the worker and starts it in the background. */
    public Worker start() {
      Worker w = build();
      w.start();
      return w;
    }
  }

  /** Starts the slots; returns at once. */
  public Worker start() {
    if (!started.compareAndSet(false, true)) throw new IllegalStateException("the worker was started already");
    keeper.scheduleWithFixedDelay(this::keepLeases, 50, 50, TimeUnit.MILLISECONDS);
    for (int i = 0; i < concurrency; i++) executor.execute(this::slot);
    return this;
  }

  /** Starts the worker (if not yet) and blocks until it stopped; throws what stopped it, if anything did. */
  public void run() throws InterruptedException {
    if (!started.get()) start();
    done.await();
    finish();
  }

  /** Takes no new job; the running handlers finish. Any thread. */
  public void stop() {
    stopping.set(true);
  }

  public boolean stopping() {
    return stopping.get();
  }

  /** Stops, waits until the running handlers are settled, and throws what stopped the worker, if anything did. */
  @Override
  public void close() {
    stop();
    if (SLOT.get() == this) return; // from one of its own handlers: it cannot wait for itself
    if (started.get()) {
      try {
        done.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    finish();
  }

  private void finish() {
    keeper.shutdownNow();
    if (ownExecutor) executor.shutdown();
    RuntimeException f = failure.get();
    if (f != null) throw f;
  }

  public long acked() {
    return acked.get();
  }

  public long nacked() {
    return nacked.get();
  }

  /** Deliveries of a job whose handler was running here: settled by that handler, not run again. */
  public long redelivered() {
    return redelivered.get();
  }

  /** Calls to the server that failed (each retried, or left to the lease). */
  public long errors() {
    return errors.get();
  }

  /** What stopped the worker, or null. */
  public RuntimeException failure() {
    return failure.get();
  }

  // One slot: reserve a job, run it, settle it, until stopped.
  private void slot() {
    long pauseMs = 100;
    SLOT.set(this);
    try {
      while (!stopping.get()) {
        List<Job> jobs;
        try {
          jobs = reserveOne();
        } catch (DelayqException.Unauthenticated | DelayqException.Forbidden | DelayqException.InvalidArgument e) {
          errors.incrementAndGet();
          failure.compareAndSet(null, e);
          stop();
          return;
        } catch (DelayqException e) {
          errors.incrementAndGet();
          pause(pauseMs); // the server is down or cannot serve: again shortly
          pauseMs = Math.min(pauseMs * 2, 5000);
          continue;
        }
        pauseMs = 100;
        for (Job job : jobs) handle(job);
      }
    } catch (RuntimeException | Error bug) { // a bug, or a handler's Error: the worker stops, run() and close() throw it
      failure.compareAndSet(null, bug instanceof RuntimeException r ? r : new IllegalStateException("a handler threw " + bug, bug));
      stop();
    } finally {
      SLOT.remove();
      done.countDown();
    }
  }

  // One reserve. Not cut off by a stop at once (a reserve cut off could lease a job to no one until
  // its lease ends), but poll and a second after it at most: a server that hangs (stopped, swapping,
  // a network that drops packets) does not hold close() for the client's whole timeout.
  private List<Job> reserveOne() {
    CompletableFuture<List<Job>> f = client.reserveAsync(queue, 1, poll, lease);
    long stopSeen = 0;
    while (true) {
      try {
        return f.get(50, TimeUnit.MILLISECONDS);
      } catch (TimeoutException e) {
        if (!stopping.get()) continue;
        long now = System.nanoTime();
        if (stopSeen == 0) stopSeen = now;
        if (now - stopSeen >= poll.toNanos() + 1_000_000_000L) {
          f.cancel(true);
          return List.of();
        }
      } catch (ExecutionException e) {
        if (e.getCause() instanceof RuntimeException r) throw r;
        throw new DelayqException.Unavailable("unavailable", 0, "the reserve failed: " + e.getCause(), null, e.getCause());
      } catch (InterruptedException e) { // the executor is shut down under the worker
        Thread.currentThread().interrupt();
        f.cancel(true);
        stop();
        return List.of();
      }
    }
  }

  private void pause(long ms) {
    long until = System.nanoTime() + ms * 1_000_000;
    while (!stopping.get() && System.nanoTime() < until) {
      try {
        Thread.sleep(Math.min(50, ms)); // a back-off that sees a stop within 50 ms
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        stop();
      }
    }
  }

  // A job the server hands out again while its handler runs here (its lease ran out: the server
  // was stopped or slow) is not run twice: the running handler settles the newest delivery.
  private void handle(Job job) {
    Running fresh = new Running(job.receipt(), leaseOf(job));
    Running r = running.compute(job.id(), (id, old) -> {
      if (old == null) return fresh;
      old.receipt = job.receipt();
      return old;
    });
    if (r != fresh) {
      redelivered.incrementAndGet();
      return;
    }
    Object result = null;
    Throwable error = null;
    try {
      result = handler.handle(job);
    } catch (Throwable e) { // an Error too: the job is nacked with it, as any failure of its handler
      error = e;
    }
    // A handler that restored an interrupt (catch InterruptedException, interrupt()) left it on this
    // pool thread: the worker's next back-off took it for a stop, and its retries gave up at once.
    Thread.interrupted();
    running.remove(job.id(), r);
    settle(job, r.receipt, r.lease, result, error);
    // Out of memory, or the JVM broken: the worker stops, run() throws it. A StackOverflowError is
    // one handler's recursion, its stack unwound by now: that job is nacked and the worker goes on.
    if (error instanceof VirtualMachineError fatal && !(fatal instanceof StackOverflowError)) throw fatal;
  }

  // The lease a delivery got: lease(d), or the queue's lease_ms, read from its config at most every
  // 10 s (as the C++ worker does). Not the delivery's leaseDeadline less this clock: that is the
  // server's clock, and with this one 20 s behind a touch came after the lease had run out (a
  // hostile try saw the job run by another consumer meanwhile). The deadline serves only while the
  // config cannot be read.
  private Duration leaseOf(Job job) {
    if (lease != null) return lease;
    long now = System.nanoTime();
    Duration known = queueLease;
    if (known == null || now - queueLeaseReadAt > 10_000_000_000L) {
      try {
        Object ms = client.config(queue).get("lease_ms");
        if (ms instanceof Number n && n.longValue() > 0) {
          known = Duration.ofMillis(n.longValue());
          queueLease = known;
          queueLeaseReadAt = now;
        }
      } catch (DelayqException e) {
        errors.incrementAndGet();
      }
    }
    if (known == null) known = Duration.ofMillis(job.leaseDeadline() - System.currentTimeMillis());
    return known.compareTo(Duration.ofSeconds(1)) < 0 ? Duration.ofSeconds(1) : known;
  }

  private void settle(Job job, String receipt, Duration lease, Object result, Throwable error) {
    try {
      if (error != null) {
        report(job, error);
        String text = error.getClass().getSimpleName() + ": " + error.getMessage();
        String cut = text.length() > 4000 ? text.substring(0, 4000) : text;
        retrying(() -> client.nack(queue, receipt, null, cut, false), lease);
        nacked.incrementAndGet();
        return;
      }
      Object kept = keepable(job, result);
      try {
        retrying(() -> {
          client.ack(queue, receipt, kept);
          return null;
        }, lease);
      } catch (DelayqException.InvalidArgument refused) {
        if (kept == null) throw refused;
        errors.incrementAndGet(); // a result the server would not keep: acked without it
        report(job, refused);
        retrying(() -> {
          client.ack(queue, receipt, null);
          return null;
        }, lease);
      }
      acked.incrementAndGet();
    } catch (DelayqException.LeaseExpired | DelayqException.NotFound e) {
      // the job was delivered again meanwhile, or deleted: not ours to settle
    } catch (DelayqException e) {
      errors.incrementAndGet(); // unsettled: the lease runs out and the job is delivered again
    }
  }

  // An ack or nack the server could not take (down a moment, restarting) is sent again, 100 ms
  // doubling to 2 s, while the delivery's lease may still hold: its receipt stays good over a
  // restart, and a job done once is then not delivered again a lease later.
  private <T> T retrying(java.util.function.Supplier<T> call, Duration lease) {
    long until = System.nanoTime() + lease.toNanos();
    long pauseMs = 100;
    while (true) {
      try {
        return call.get();
      } catch (DelayqException.Unavailable e) {
        if (until - System.nanoTime() <= pauseMs * 1_000_000) throw e;
        errors.incrementAndGet();
        try {
          Thread.sleep(pauseMs); // the back-off before the next try
        } catch (InterruptedException interrupted) {
          Thread.currentThread().interrupt();
          throw e;
        }
        pauseMs = Math.min(pauseMs * 2, 2000);
      }
    }
  }

  private Object keepable(Job job, Object result) {
    if (result == null) return null;
    try {
      String text = Json.write(result);
      int size = text.getBytes(java.nio.charset.StandardCharsets.UTF_8).length;
      if (size > MAX_RESULT_BYTES) {
        throw new IllegalArgumentException("the result of job " + job.id() + " is " + size + " bytes of JSON; at most " + MAX_RESULT_BYTES + " are kept");
      }
      return new Json.Raw(text);
    } catch (RuntimeException e) { // not JSON, too large, or the value's own code threw while it was read
      errors.incrementAndGet();
      report(job, e);
      return null;
    } catch (StackOverflowError e) { // a structure nested past the stack (the codec's own depth limit comes first)
      errors.incrementAndGet();
      report(job, e);
      return null;
    }
  }

  private void report(Job job, Throwable error) {
    if (onError == null) return;
    try {
      onError.accept(job, error);
    } catch (RuntimeException raised) { // the callback's own failure: counted, and the worker goes on
      errors.incrementAndGet();
    }
  }

  private void keepLeases() {
    long now = System.nanoTime();
    List<Running> due = new ArrayList<>();
    for (Running r : running.values()) if (r.nextTouchNanos <= now) due.add(r);
    for (Running r : due) {
      r.nextTouchNanos = now + r.lease.toNanos() / 3;
      try {
        client.touch(queue, r.receipt, r.lease, null);
      } catch (DelayqException.LeaseExpired | DelayqException.NotFound e) {
        // settled meanwhile, or delivered again: nothing to keep alive
      } catch (DelayqException e) {
        errors.incrementAndGet();
      }
    }
  }

  /**
   * From a handler: reports how far it has got with job (any JSON value up to 4 KiB), shown on the
   * job while it runs; it touches the lease too. LeaseExpired or NotFound when the job is no longer
   * this handler's; InvalidArgument for a job that is not running in this worker (as Go's client).
   */
  public void progress(Job job, Object value) {
    Running r = running.get(Client.need(job, "the job").id());
    if (r == null) throw new DelayqException.InvalidArgument("job " + job.id() + " is not running in this worker");
    client.touch(queue, r.receipt, r.lease, value);
    r.nextTouchNanos = System.nanoTime() + r.lease.toNanos() / 3;
  }
}
