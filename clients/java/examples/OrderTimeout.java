// The order-timeout story: cancel an unpaid order 30 minutes after it was placed (here: 1 s).
//
//   java -cp delayq-client.jar examples/OrderTimeout.java [http://127.0.0.1:7070]
//
// A key makes placing the same order twice harmless; a worker cancels the unpaid order and its
// result is what the producer's wait gets; a poison job fails every attempt, goes dead, and is
// replayed once the handler is fixed.
import dev.delayq.Client;
import dev.delayq.EnqueueResult;
import dev.delayq.JobInfo;
import dev.delayq.JobRef;
import dev.delayq.Json;
import dev.delayq.NewJob;
import dev.delayq.Worker;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

public class OrderTimeout {
  public static void main(String[] args) throws Exception {
    Client c = Client.builder(args.length > 0 ? args[0] : "http://127.0.0.1:7070").build();
    // Two attempts, 100 ms apart; acked orders kept an hour with their results, so that a wait
    // that begins after its job ended still reads how it ended.
    c.setConfig("orders", Map.of("max_attempts", 2, "backoff", Map.of("base_ms", 100, "jitter", 0),
        "keep_completed_ms", 3_600_000));

    NewJob order = NewJob.of(Map.of("orderId", 42)).delay(Duration.ofSeconds(1)).key("order-42");
    EnqueueResult first = c.enqueue("orders", order);
    EnqueueResult again = c.enqueue("orders", order);
    System.out.println("enqueued " + first.id() + " duplicate: " + again.duplicate());
    EnqueueResult bad = c.enqueue("orders", NewJob.of(Map.of("orderId", "not-a-number")).key("order-bad"));

    AtomicBoolean fixed = new AtomicBoolean();
    Worker.Handler cancelUnpaid = job -> {
      Object id = ((Map<?, ?>) job.payload()).get("orderId");
      if (!(id instanceof Number) && !fixed.get()) throw new IllegalArgumentException("order id " + id + " is not a number");
      return Map.of("cancelled", id, "attempt", job.attempt());
    };
    Worker worker = Worker.builder(c, "orders", cancelUnpaid).concurrency(4).start();
    try {
      // The producer waits for its order's outcome: the worker's result.
      JobInfo outcome = c.waitFor("orders", JobRef.id(first.id()), Duration.ofMinutes(1));
      System.out.println("order 42: " + outcome.state() + " " + Json.write(outcome.result()));
      JobInfo dead = c.waitFor("orders", JobRef.id(bad.id()), Duration.ofMinutes(1));
      System.out.println("dead: " + dead.key() + " " + dead.lastError());

      fixed.set(true); // the handler is fixed: replay the dead job
      int replayed = c.replay("orders", null);
      outcome = c.waitFor("orders", JobRef.id(bad.id()), Duration.ofMinutes(1));
      System.out.println("replayed " + replayed + " then " + outcome.state() + " " + Json.write(outcome.result()));
    } finally {
      worker.close(); // takes no new job, lets the running handlers finish and settles them
    }
    System.out.println("done: acked " + worker.acked() + " nacked " + worker.nacked());
  }
}
