package delayq_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

func runWorker(t *testing.T, w *delayq.Worker, ctx context.Context) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return done
}

// A guard against a hang, not a synchronisation.
func awaitRun(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("the worker did not return within 60 s")
		return nil
	}
}

func TestWorkerAcksWithTheResultNacksErrorsAndPanicsAndReportsAResultItCannotKeep(t *testing.T) {
	s := startServer(t)
	c := newClient(t, s.url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	must[*delayq.Config](t)(c.SetConfig(ctx, "w", delayq.ConfigUpdate{KeepCompletedMs: delayq.Ptr[int64](3_600_000)}))
	ids := map[string]string{}
	for _, what := range []string{"ok", "fail", "panic", "huge", "panic-nil", "goexit"} {
		ids[what] = must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "w", delayq.NewJob{Payload: what, MaxAttempts: 1})).ID
	}
	var handled atomic.Int32
	var reported []string
	var mu sync.Mutex
	w, err := delayq.NewWorker(c, "w", func(_ context.Context, job *delayq.Job) (any, error) {
		if handled.Add(1) == 6 {
			cancel()
		}
		var what string
		_ = job.Decode(&what)
		switch what {
		case "fail":
			return nil, errors.New("card declined")
		case "panic":
			panic("out of range")
		case "huge":
			return strings.Repeat("x", delayq.MaxResultBytes), nil
		case "panic-nil": // before Go 1.21, recover() answers nil: the job was acked as done
			var none error
			panic(none)
		case "goexit": // t.FailNow's way out: it ended the slot, and the job's lease was kept for ever
			runtime.Goexit()
		}
		return map[string]any{"paid": 1999}, nil
	}, delayq.WorkerOptions{Poll: 200 * time.Millisecond, OnError: func(job *delayq.Job, err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err.Error())
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := awaitRun(t, runWorker(t, w, ctx)); err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	get := func(what string) *delayq.JobInfo {
		return must[*delayq.JobInfo](t)(c.Get(bg, "w", delayq.ByID(ids[what])))
	}
	if j := get("ok"); j.State != "completed" || string(j.Result) != `{"paid":1999}` {
		t.Errorf("ok: %+v", j)
	}
	if j := get("fail"); j.State != "dead" || j.LastError != "card declined" {
		t.Errorf("fail: %+v", j)
	}
	if j := get("panic"); j.State != "dead" || j.LastError != "panic: out of range" {
		t.Errorf("panic: %+v", j)
	}
	if j := get("huge"); j.State != "completed" || j.Result != nil {
		t.Errorf("huge: %+v", j)
	}
	for _, what := range []string{"panic-nil", "goexit"} {
		if j := get(what); j.State != "dead" || !strings.HasPrefix(j.LastError, "panic: the handler panicked with nil or called runtime.Goexit") {
			t.Errorf("%s: %+v", what, j)
		}
	}
	if w.Acked() != 2 || w.Nacked() != 4 || w.Errors() != 1 {
		t.Errorf("acked %d nacked %d errors %d", w.Acked(), w.Nacked(), w.Errors())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 5 || !strings.Contains(strings.Join(reported, "|"), "at most 65536 are kept") {
		t.Errorf("reported %q", reported)
	}
}

// A cancel takes no new job but lets the running handlers finish, and settles them.
func TestWorkerShutdownLetsTheRunningHandlersFinishAndSettlesThem(t *testing.T) {
	s := startServer(t)
	c := newClient(t, s.url)
	ctx, cancel := context.WithCancel(context.Background())
	for i := 0; i < 6; i++ {
		must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "g", delayq.NewJob{Payload: i}))
	}
	var started sync.WaitGroup
	started.Add(4)
	release := make(chan struct{})
	w := must[*delayq.Worker](t)(delayq.NewWorker(c, "g", func(hctx context.Context, job *delayq.Job) (any, error) {
		started.Done()
		<-release
		if hctx.Err() != nil {
			return nil, errors.New("the shutdown cancelled a running handler")
		}
		return nil, nil
	}, delayq.WorkerOptions{Concurrency: 4, Poll: 200 * time.Millisecond}))
	done := runWorker(t, w, ctx)
	started.Wait()
	cancel()
	close(release)
	if err := awaitRun(t, done); err != nil {
		t.Fatal(err)
	}
	stats := must[*delayq.QueueStats](t)(c.Stats(context.Background(), "g"))
	if w.Acked() != 4 || stats.Ready != 2 || stats.Reserved != 0 {
		t.Fatalf("acked %d, then ready %d reserved %d", w.Acked(), stats.Ready, stats.Reserved)
	}
}

// A handler that outlasts its lease keeps the job: the worker touches it every third of the lease.
func TestWorkerKeepsTheLeaseOfAHandlerThatOutlastsIt(t *testing.T) {
	s := startServer(t)
	c := newClient(t, s.url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	id := must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "slow", delayq.NewJob{Payload: 1})).ID
	var w *delayq.Worker
	w = must[*delayq.Worker](t)(delayq.NewWorker(c, "slow", func(hctx context.Context, job *delayq.Job) (any, error) {
		defer cancel()
		first := job.LeaseDeadline
		for step := 0; ; step++ { // the work: until the server shows the lease moved twice past its first end
			if err := w.Progress(hctx, job, step); err != nil {
				return nil, err
			}
			info, err := c.Get(hctx, "slow", delayq.ByID(job.ID))
			if err != nil {
				return nil, err
			}
			if info.State != "reserved" || info.Attempt != 1 {
				return nil, fmt.Errorf("the job went %s, attempt %d", info.State, info.Attempt)
			}
			if time.Now().UnixMilli() > first+2000 {
				return "outlasted", nil
			}
			time.Sleep(100 * time.Millisecond) // the handler's work, not a synchronisation
		}
	}, delayq.WorkerOptions{Lease: time.Second, Poll: 200 * time.Millisecond}))
	if err := awaitRun(t, runWorker(t, w, ctx)); err != nil {
		t.Fatal(err)
	}
	if w.Acked() != 1 || w.Nacked() != 0 {
		t.Fatalf("acked %d nacked %d errors %d", w.Acked(), w.Nacked(), w.Errors())
	}
	if _, err := c.Get(context.Background(), "slow", delayq.ByID(id)); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("the job after its ack: %v", err)
	}
}

func TestWorkerStopsOnARefusalNoRetryMends(t *testing.T) {
	s := startServer(t, "--auth-token", "right")
	w := must[*delayq.Worker](t)(delayq.NewWorker(newClient(t, s.url, delayq.WithToken("wrong")), "q",
		func(context.Context, *delayq.Job) (any, error) { return nil, nil }, delayq.WorkerOptions{Concurrency: 3}))
	if err := awaitRun(t, runWorker(t, w, context.Background())); !errors.Is(err, delayq.ErrUnauthenticated) {
		t.Fatalf("Run answered %v", err)
	}
	for _, bad := range []delayq.WorkerOptions{{Concurrency: -1}, {Concurrency: 1001}, {Lease: time.Millisecond}, {Lease: 13 * time.Hour}} {
		if _, err := delayq.NewWorker(newClient(t, s.url), "q", func(context.Context, *delayq.Job) (any, error) { return nil, nil }, bad); err == nil {
			t.Errorf("NewWorker took %+v", bad)
		}
	}
	if _, err := delayq.NewWorker(newClient(t, s.url), "", nil, delayq.WorkerOptions{}); err == nil {
		t.Error("NewWorker took an empty queue name")
	}
}

// Producers, a worker and administration at once: every job is handled, none twice.
func TestConcurrentProducersAWorkerAndAdministrationLoseAndRepeatNothing(t *testing.T) {
	s := startServer(t)
	c := newClient(t, s.url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const producers, each = 4, 50
	var mu sync.Mutex
	handled := map[string]int{}
	want := map[string]bool{}
	w := must[*delayq.Worker](t)(delayq.NewWorker(c, "mixed", func(_ context.Context, job *delayq.Job) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		handled[job.ID]++
		return job.Attempt, nil
	}, delayq.WorkerOptions{Concurrency: 8, Poll: 200 * time.Millisecond}))
	done := runWorker(t, w, ctx)
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				// Every fifth repeats the last key: a duplicate, not a new job.
				key := fmt.Sprintf("p%d-%d", p, i-i%5/4)
				r, err := c.Enqueue(ctx, "mixed", delayq.NewJob{Payload: i, Key: key, Delay: time.Duration(i%3) * time.Millisecond})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				want[r.ID] = true
				mu.Unlock()
			}
		}(p)
	}
	wg.Add(1)
	go func() { // administration meanwhile, and requests that fail
		defer wg.Done()
		for i := 0; i < 20; i++ {
			_ = c.Pause(ctx, "mixed")
			_ = c.Resume(ctx, "mixed")
			_, _ = c.SetConfig(ctx, "mixed", delayq.ConfigUpdate{MaxAttempts: delayq.Ptr(3 + i%3)})
			_, _ = c.Stats(ctx, "mixed")
			_, _ = c.Jobs(ctx, "mixed", "ready", 10, "")
			if err := c.Ack(ctx, "mixed", "forged", nil); !errors.Is(err, delayq.ErrInvalidArgument) {
				t.Errorf("a forged ack answered %v", err)
			}
		}
	}()
	wg.Wait()
	_ = c.Resume(ctx, "mixed")
	awaitDrained(t, c, "mixed")
	cancel()
	if err := awaitRun(t, done); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(want) == 0 || len(handled) != len(want) {
		t.Fatalf("%d jobs enqueued, %d handled", len(want), len(handled))
	}
	for id, n := range handled {
		if !want[id] || n != 1 {
			t.Fatalf("job %s handled %d times (enqueued: %v)", id, n, want[id])
		}
	}
}

// kill -9 of the server under a worker: it backs off while the server is gone, goes on once it is
// back, and every job is handled (a delivery whose ack was lost comes again: at least once).
func TestWorkerBacksOffThroughAServerKilledAndStartedAgain(t *testing.T) {
	s := startServer(t, "--durability", "sync")
	c := newClient(t, s.url, delayq.WithTimeout(3*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	must[*delayq.Config](t)(c.SetConfig(ctx, "k", delayq.ConfigUpdate{LeaseMs: delayq.Ptr[int64](2000)}))
	const jobs = 40
	for i := 0; i < jobs; i++ {
		must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "k", delayq.NewJob{Payload: i}))
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	killed := make(chan struct{})
	var once sync.Once
	w := must[*delayq.Worker](t)(delayq.NewWorker(c, "k", func(_ context.Context, job *delayq.Job) (any, error) {
		mu.Lock()
		seen[job.ID] = true
		n := len(seen)
		mu.Unlock()
		if n == jobs/2 {
			once.Do(func() { close(killed) })
		}
		return nil, nil
	}, delayq.WorkerOptions{Concurrency: 4, Poll: 200 * time.Millisecond}))
	done := runWorker(t, w, ctx)
	<-killed
	s.kill()
	s.start()
	awaitDrained(t, c, "k")
	cancel()
	if err := awaitRun(t, done); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != jobs || w.Errors() == 0 {
		t.Fatalf("handled %d of %d, %d errors (the server was gone a while)", len(seen), jobs, w.Errors())
	}
}

// Returns once the queue holds no live job (every job handled and acked), as the server tells it.
func awaitDrained(t *testing.T, c *delayq.Client, queue string) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 60*time.Second; {
		stats, err := c.Stats(context.Background(), queue)
		if err == nil && stats.Scheduled+stats.Ready+stats.Reserved+stats.Dead == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond) // a poll of the server's state
	}
	t.Fatalf("queue %s still holds jobs after 60 s", queue)
}

// A server that hangs (stopped, swapping, a network dropping packets) holds a shutdown for Poll and
// a second at most, not for the client's timeout (30 s): a hostile try saw 29 s, past the 30 s a
// container gets to stop.
func TestWorkerShutdownIsNotHeldByAServerThatHangs(t *testing.T) {
	s := startServer(t)
	c := newClient(t, s.url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "hung", delayq.NewJob{Payload: 1}))
	w, err := delayq.NewWorker(c, "hung", func(context.Context, *delayq.Job) (any, error) {
		return nil, nil
	}, delayq.WorkerOptions{Poll: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := runWorker(t, w, ctx)
	// Once its job is acked the worker only reserves: its next reserve reaches a server that does
	// not answer (an ack under way is another matter: the shutdown settles the running handlers).
	for guard := time.Now(); w.Acked() == 0; time.Sleep(10 * time.Millisecond) { // a wait for a condition
		if time.Since(guard) > 60*time.Second {
			t.Fatal("the job was not acked within 60 s")
		}
	}
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }()
	stopped := time.Now()
	cancel()
	if err := awaitRun(t, done); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(stopped); took > 5*time.Second {
		t.Errorf("Run returned %v after the cancel; Poll (1 s) and a second at most", took)
	}
}
