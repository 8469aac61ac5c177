// The order-timeout story: cancel an unpaid order 30 minutes after it was placed (here: 1 s).
//
//	go run ./examples/ordertimeout [http://127.0.0.1:7070]
//
// A key makes placing the same order twice harmless; a worker cancels the unpaid order and its
// result is what the producer's wait gets; a poison job fails every attempt, goes dead, and is
// replayed once the handler is fixed.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync/atomic"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

func main() {
	url := "http://127.0.0.1:7070"
	if len(os.Args) > 1 {
		url = os.Args[1]
	}
	c, err := delayq.New(url)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	// Two attempts, 100 ms apart; acked orders kept an hour with their results, so that a wait
	// that begins after its job ended still reads how it ended.
	if _, err := c.SetConfig(ctx, "orders", delayq.ConfigUpdate{
		MaxAttempts: delayq.Ptr(2), Backoff: &delayq.Backoff{BaseMs: 100, Factor: 2, MaxMs: 1000},
		KeepCompletedMs: delayq.Ptr[int64](3_600_000),
	}); err != nil {
		log.Fatal(err)
	}

	order := delayq.NewJob{Payload: map[string]any{"orderId": 42}, Delay: time.Second, Key: "order-42"}
	first, err := c.Enqueue(ctx, "orders", order)
	if err != nil {
		log.Fatal(err)
	}
	again, err := c.Enqueue(ctx, "orders", order)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("enqueued", first.ID, "duplicate:", again.Duplicate)
	bad, err := c.Enqueue(ctx, "orders", delayq.NewJob{Payload: map[string]any{"orderId": "not-a-number"}, Key: "order-bad"})
	if err != nil {
		log.Fatal(err)
	}

	var fixed atomic.Bool
	cancelUnpaid := func(_ context.Context, job *delayq.Job) (any, error) {
		var o struct{ OrderID any }
		if err := job.Decode(&o); err != nil {
			return nil, err
		}
		if _, isNumber := o.OrderID.(float64); !isNumber && !fixed.Load() {
			return nil, fmt.Errorf("order id %v is not a number", o.OrderID)
		}
		return map[string]any{"cancelled": o.OrderID, "attempt": job.Attempt}, nil
	}
	worker, err := delayq.NewWorker(c, "orders", cancelUnpaid, delayq.WorkerOptions{Concurrency: 4})
	if err != nil {
		log.Fatal(err)
	}
	run, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- worker.Run(run) }()

	// The producer waits for its order's outcome: the worker's result.
	outcome, err := c.Wait(ctx, "orders", delayq.ByID(first.ID), time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("order 42:", outcome.State, string(outcome.Result))
	dead, err := c.Wait(ctx, "orders", delayq.ByID(bad.ID), time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("dead:", dead.Key, dead.LastError)

	fixed.Store(true) // the handler is fixed: replay the dead job
	replayed, err := c.Replay(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	outcome, err = c.Wait(ctx, "orders", delayq.ByID(bad.ID), time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("replayed", replayed, "then", outcome.State, string(outcome.Result))
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	fmt.Println("done: acked", worker.Acked(), "nacked", worker.Nacked())
}
