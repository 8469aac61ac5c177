package delayq_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

var waiting = regexp.MustCompile(`(?m)^delayq_reserve_waiting (\d+)`)

// Returns once the server holds n waits (its /metrics), so what follows comes after them.
func awaitOpenWaits(t *testing.T, url string, n int) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 30*time.Second; {
		if res, err := http.Get(url + "/metrics"); err == nil {
			text, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if m := waiting.FindSubmatch(text); m != nil {
				if open, _ := strconv.Atoi(string(m[1])); open >= n {
					return
				}
			}
		}
		time.Sleep(10 * time.Millisecond) // a poll of the server's state
	}
	t.Fatalf("%d waits did not open on the server", n)
}

type outcome struct {
	job *delayq.JobInfo
	err error
}

func waitAsync(c *delayq.Client, queue string, ref delayq.JobRef, timeout time.Duration) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		j, err := c.Wait(context.Background(), queue, ref, timeout)
		ch <- outcome{j, err}
	}()
	return ch
}

func TestAWaitAnswersAtTheAckWithItsResultThoughNothingIsKept(t *testing.T) {
	s := startServer(t)
	c := newClient(t, s.url)
	ctx := context.Background()
	made := must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "w", delayq.NewJob{Payload: map[string]int{"order": 7}, Key: "order-7"}))
	byID := waitAsync(c, "w", delayq.ByID(made.ID), 30*time.Second)
	byKey := waitAsync(c, "w", delayq.ByKey("order-7"), 30*time.Second)
	awaitOpenWaits(t, s.url, 2)
	jobs := must[[]delayq.Job](t)(c.Reserve(ctx, "w", delayq.ReserveOptions{}))
	if err := c.Ack(ctx, "w", jobs[0].Receipt, map[string]int{"paid": 1999}); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan outcome{byID, byKey} {
		o := <-ch
		if o.err != nil || o.job.ID != made.ID || o.job.State != "completed" || string(o.job.Result) != `{"paid":1999}` {
			t.Fatalf("the wait answered %+v, %v", o.job, o.err)
		}
	}
}

func TestAWaitAnswersDeadCancelledOrTheJobAsItIsAtItsTimeout(t *testing.T) {
	s := startServer(t)
	c := newClient(t, s.url)
	ctx := context.Background()
	later := must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "w2", delayq.NewJob{Payload: "later", Delay: time.Hour}))
	doomed := must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "w2", delayq.NewJob{Payload: "doomed", MaxAttempts: 1}))
	cancelled := waitAsync(c, "w2", delayq.ByID(later.ID), 30*time.Second)
	dead := waitAsync(c, "w2", delayq.ByID(doomed.ID), 30*time.Second)
	awaitOpenWaits(t, s.url, 2)
	if err := c.Cancel(ctx, "w2", delayq.ByID(later.ID)); err != nil {
		t.Fatal(err)
	}
	jobs := must[[]delayq.Job](t)(c.Reserve(ctx, "w2", delayq.ReserveOptions{}))
	must[*delayq.NackResult](t)(c.Nack(ctx, "w2", jobs[0].Receipt, delayq.NackOptions{Error: "card declined"}))
	if o := <-cancelled; o.err != nil || o.job.State != "cancelled" || string(o.job.Payload) != `"later"` {
		t.Fatalf("cancelled: %+v %v", o.job, o.err)
	}
	if o := <-dead; o.err != nil || o.job.State != "dead" || o.job.LastError != "card declined" {
		t.Fatalf("dead: %+v %v", o.job, o.err)
	}
	still := must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "w2", delayq.NewJob{Payload: "still", Delay: time.Hour}))
	start := time.Now()
	j, err := c.Wait(ctx, "w2", delayq.ByID(still.ID), 300*time.Millisecond)
	if err != nil || j.State != "scheduled" || j.Final() || time.Since(start) < 299*time.Millisecond {
		t.Fatalf("a wait at its end answered %+v %v after %v", j, err, time.Since(start))
	}
	if _, err := c.Wait(ctx, "w2", delayq.ByID("01HZZZZZZZZZZZZZZZZZZZZZZZ"), time.Second); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("a wait on no job answered %v", err)
	}
	// A context's cancel ends a wait at once.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(short, "w2", delayq.ByID(still.ID), time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait whose context ended answered %v", err)
	}
}

// Many waits while their jobs are acked, nacked and cancelled at once: each gets its own outcome.
func TestManyWaitsWhileTheirJobsEndEachGetTheirOwnOutcome(t *testing.T) {
	s := startServer(t)
	c := newClient(t, s.url)
	ctx := context.Background()
	const n = 30
	ids := make([]string, n)
	waits := make([]<-chan outcome, n)
	for i := range ids {
		ids[i] = must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "w4", delayq.NewJob{Payload: i, MaxAttempts: 1})).ID
		waits[i] = waitAsync(c, "w4", delayq.ByID(ids[i]), 30*time.Second)
	}
	awaitOpenWaits(t, s.url, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i += 3 {
		wg.Add(1)
		go func(id string) { defer wg.Done(); _ = c.Cancel(ctx, "w4", delayq.ByID(id)) }(ids[i])
	}
	wg.Wait()
	for _, job := range must[[]delayq.Job](t)(c.Reserve(ctx, "w4", delayq.ReserveOptions{Max: n})) {
		wg.Add(1)
		go func(job delayq.Job) {
			defer wg.Done()
			var i int
			_ = job.Decode(&i)
			if i%2 == 0 {
				_ = c.Ack(ctx, "w4", job.Receipt, i)
			} else {
				_, _ = c.Nack(ctx, "w4", job.Receipt, delayq.NackOptions{Error: "odd"})
			}
		}(job)
	}
	wg.Wait()
	for i, ch := range waits {
		o := <-ch
		want := map[bool]string{true: "completed", false: "dead"}[i%2 == 0]
		if i%3 == 0 {
			want = "cancelled"
		}
		if o.err != nil || o.job.State != want || (want == "completed" && string(o.job.Result) != fmt.Sprint(i)) {
			t.Fatalf("job %d: %+v %v, want %s", i, o.job, o.err, want)
		}
	}
}

// kill -9 under a wait: the client asks the server again once it is back, and gets the outcome.
func TestAWaitOutlivesAServerKilledAndStartedAgain(t *testing.T) {
	s := startServer(t, "--durability", "sync")
	c := newClient(t, s.url)
	ctx := context.Background()
	made := must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "w5", delayq.NewJob{Payload: "x"}))
	job := must[[]delayq.Job](t)(c.Reserve(ctx, "w5", delayq.ReserveOptions{Lease: 10 * time.Minute}))[0]
	waited := waitAsync(c, "w5", delayq.ByID(made.ID), 30*time.Second)
	awaitOpenWaits(t, s.url, 1)
	s.kill()
	s.start()
	awaitOpenWaits(t, s.url, 1) // the client asked the new server again
	if err := c.Ack(ctx, "w5", job.Receipt, "after the restart"); err != nil {
		t.Fatal(err)
	}
	if o := <-waited; o.err != nil || o.job.State != "completed" || string(o.job.Result) != `"after the restart"` {
		t.Fatalf("the wait answered %+v %v", o.job, o.err)
	}
}
