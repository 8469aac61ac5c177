package delayq_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

// Found by a hostile try of the client from its docs alone; each failed before its fix.

func TestRefusalsTheClientMakesItselfAreInvalidArgumentsNamingWhatIsWrong(t *testing.T) {
	if _, err := delayq.New("http://127.0.0.1:1", delayq.WithToken("s3cret\n")); !errors.Is(err, delayq.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "line end") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a token read with its newline: %v", err)
	}
	if _, err := delayq.New("ftp://x"); !errors.Is(err, delayq.ErrInvalidArgument) {
		t.Errorf("a bad url: %v", err)
	}
	if _, err := delayq.NewWorker(nil, "q", func(context.Context, *delayq.Job) (any, error) { return nil, nil }, delayq.WorkerOptions{}); !errors.Is(err, delayq.ErrInvalidArgument) {
		t.Errorf("a nil client: %v", err)
	}
	c := newClient(t, "http://127.0.0.1:1")
	if _, err := delayq.NewWorker(c, "q", func(context.Context, *delayq.Job) (any, error) { return nil, nil }, delayq.WorkerOptions{Concurrency: -1}); !errors.Is(err, delayq.ErrInvalidArgument) {
		t.Errorf("a bad concurrency: %v", err)
	}
	// A moment past what int64 milliseconds hold wrapped around to "due now".
	far := time.Unix(1<<60, 0)
	if _, err := c.Enqueue(context.Background(), "q", delayq.NewJob{DeliverAt: far}); !errors.Is(err, delayq.ErrInvalidArgument) || !strings.Contains(err.Error(), "DeliverAt") {
		t.Errorf("DeliverAt far ahead: %v", err)
	}
	if _, err := c.PutSchedule(context.Background(), "q", "s", delayq.Schedule{Every: time.Minute, StartAt: far}); !errors.Is(err, delayq.ErrInvalidArgument) || !strings.Contains(err.Error(), "StartAt") {
		t.Errorf("StartAt far ahead: %v", err)
	}
	// A "no timeout" of MaxInt64 made every waiting call fail at once (timeout + wait overflowed).
	if _, err := delayq.New("http://127.0.0.1:1", delayq.WithTimeout(math.MaxInt64)); !errors.Is(err, delayq.ErrInvalidArgument) || !strings.Contains(err.Error(), "up to 24h") {
		t.Errorf("a timeout past a day: %v", err)
	}
	// Text that is not UTF-8 was sent as U+FFFD: a job keyed so could never be read by its key.
	ctx := context.Background()
	for what, err := range map[string]error{
		"Key":         second(c.Enqueue(ctx, "q", delayq.NewJob{Key: "order-\xff"})),
		"Group":       second(c.Enqueue(ctx, "q", delayq.NewJob{Group: "\xfe"})),
		"header":      second(c.Enqueue(ctx, "q", delayq.NewJob{Headers: map[string]string{"h": "\xff"}})),
		"the key":     second(c.Get(ctx, "q", delayq.ByKey("order-\xff"))),
		"queue name":  second(c.Stats(ctx, "q\xff")),
		"schedule's":  second(c.PutSchedule(ctx, "q", "s\xff", delayq.Schedule{Every: time.Minute})),
		"no receipt":  second(c.Release(ctx, "q")),
		"Tracestate":  second(c.PutSchedule(ctx, "q", "s", delayq.Schedule{Every: time.Minute, Tracestate: "a=1"})),
		"the job id":  c.Cancel(ctx, "q", delayq.ByID("\xff")),
		"a header's":  second(c.Enqueue(ctx, "q", delayq.NewJob{Headers: map[string]string{"\xff": "v"}})),
		"Traceparent": second(c.Enqueue(ctx, "q", delayq.NewJob{Traceparent: "00-\xff"})),
	} {
		if !errors.Is(err, delayq.ErrInvalidArgument) || !strings.Contains(err.Error(), what) {
			t.Errorf("%s: %v", what, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// A queue named "." or ".." was made by this client and could not be reached through a proxy,
// curl or a browser (they take dot segments out of a path): the server refuses the name.
func TestAQueueNamedLikeADotSegmentIsRefused(t *testing.T) {
	s := startServer(t)
	c := newClient(t, s.url)
	for _, dots := range []string{".", ".."} {
		_, err := c.Enqueue(context.Background(), dots, delayq.NewJob{Payload: 1})
		if !errors.Is(err, delayq.ErrInvalidArgument) || !strings.Contains(err.Error(), "dot segment") {
			t.Errorf("%q: %v", dots, err)
		}
	}
}

// A schedule's runs carry its trace context (the API took it; the Go Schedule had no field for it).
func TestAScheduleGivesItsRunsItsTraceContext(t *testing.T) {
	s := startServer(t)
	c := newClient(t, s.url)
	ctx := context.Background()
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	must[map[string]any](t)(c.PutSchedule(ctx, "traced", "report", delayq.Schedule{Every: time.Hour, Traceparent: parent, Tracestate: "a=1"}))
	jobs := must[*delayq.JobPage](t)(c.Jobs(ctx, "traced", "scheduled", 0, ""))
	if len(jobs.Jobs) == 0 || jobs.Jobs[0].Traceparent != parent || jobs.Jobs[0].Tracestate != "a=1" {
		t.Fatalf("the runs: %+v", jobs.Jobs)
	}
}

func TestAScheduleTakesABinaryPayloadAsAJobDoes(t *testing.T) {
	s := startServer(t)
	c := newClient(t, s.url)
	got := must[map[string]any](t)(c.PutSchedule(context.Background(), "b", "s", delayq.Schedule{Every: time.Minute, Payload: []byte{0, 255}}))
	if got["payload_base64"] != "AP8=" || got["payload"] != nil {
		t.Fatalf("the schedule keeps %v", got)
	}
}

// A server full of waits (--max-waiting): the wait is asked again until its timeout, then answers
// the job as it is (a plain read is never refused), not Overloaded before its time.
func TestAWaitOnAFullServerAnswersTheJobAsItIsAtItsTimeout(t *testing.T) {
	s := startServer(t, "--max-waiting", "1")
	c := newClient(t, s.url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	job := must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "full", delayq.NewJob{Payload: 1, Delay: time.Hour}))
	go func() { _, _ = c.Reserve(ctx, "other", delayq.ReserveOptions{Wait: 20 * time.Second}) }() // takes the one room
	awaitOpenWaits(t, s.url, 1)
	start := time.Now()
	j, err := c.Wait(ctx, "full", delayq.ByID(job.ID), 1500*time.Millisecond)
	if err != nil || j.State != "scheduled" || time.Since(start) < 1400*time.Millisecond {
		t.Fatalf("answered %+v, %v after %v", j, err, time.Since(start))
	}
}

// A job handed out again while its handler runs (its lease ran out while the server was stopped
// or slow; here its delivery is given back from the handler, which does the same at once) goes to
// another slot of the same worker. It is not run twice: the running handler settles the newest
// delivery.
func TestAJobDeliveredAgainWhileItsHandlerRunsIsNotRunTwice(t *testing.T) {
	s := startServer(t)
	c := newClient(t, s.url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	id := must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "again", delayq.NewJob{Payload: 1})).ID
	var runs atomic.Int32
	var w *delayq.Worker
	w = must[*delayq.Worker](t)(delayq.NewWorker(c, "again", func(hctx context.Context, job *delayq.Job) (any, error) {
		runs.Add(1)
		if _, err := c.Release(hctx, "again", job.Receipt); err != nil {
			return nil, err
		}
		for start := time.Now(); w.Redelivered() == 0 && time.Since(start) < 30*time.Second; {
			time.Sleep(20 * time.Millisecond) // the handler's work: until the job came again
		}
		cancel()
		return "once", nil
	}, delayq.WorkerOptions{Concurrency: 2, Poll: 200 * time.Millisecond}))
	if err := awaitRun(t, runWorker(t, w, ctx)); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 1 || w.Redelivered() != 1 || w.Acked() != 1 {
		t.Fatalf("runs %d, redelivered %d, acked %d", runs.Load(), w.Redelivered(), w.Acked())
	}
	if _, err := c.Get(context.Background(), "again", delayq.ByID(id)); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("the job after its ack with the newest receipt: %v", err)
	}
}

// An ack the server could not take (killed, started again) is sent again while the lease holds:
// the job done once is not delivered again a lease later.
func TestAnAckWhileTheServerIsDownIsSentAgainOnceItIsBack(t *testing.T) {
	s := startServer(t, "--durability", "sync")
	c := newClient(t, s.url, delayq.WithTimeout(2*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	id := must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "acks", delayq.NewJob{Payload: 1})).ID
	gone := make(chan struct{})
	back := make(chan struct{})
	var runs atomic.Int32
	w := must[*delayq.Worker](t)(delayq.NewWorker(c, "acks", func(context.Context, *delayq.Job) (any, error) {
		runs.Add(1)
		close(gone)
		<-back
		return nil, nil
	}, delayq.WorkerOptions{Lease: 30 * time.Second, Poll: 200 * time.Millisecond}))
	done := runWorker(t, w, ctx)
	<-gone
	s.kill()
	close(back)                        // the handler ends while the server is down: its ack fails, and is sent again
	time.Sleep(300 * time.Millisecond) // the fault: the server down a while
	s.start()
	for start := time.Now(); w.Acked() == 0 && time.Since(start) < 20*time.Second; {
		time.Sleep(20 * time.Millisecond) // a poll of the worker's counters
	}
	cancel()
	if err := awaitRun(t, done); err != nil {
		t.Fatal(err)
	}
	if w.Acked() != 1 || runs.Load() != 1 {
		t.Fatalf("acked %d, runs %d", w.Acked(), runs.Load())
	}
	if _, err := c.Get(context.Background(), "acks", delayq.ByID(id)); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("the job after the ack sent again: %v", err)
	}
}

// A stand-in for a reverse proxy (docs/security.md) in front of a delayq that restarts: 502 Bad
// Gateway twice, then the job, completed. The client took the 502 for a refusal: a wait gave up at
// once, and a worker's ack was not sent again (the job ran twice).
func TestAProxysBadGatewayIsUnavailableAndAWaitAsksAgain(t *testing.T) {
	var asked atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if asked.Add(1) <= 2 {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html><title>502 Bad Gateway</title></html>"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"01HZZZZZZZZZZZZZZZZZZZZZZZ","queue":"p","state":"completed","payload":1,"result":7}`))
	}))
	defer proxy.Close()
	c := newClient(t, proxy.URL)
	ctx := context.Background()
	j, err := c.Wait(ctx, "p", delayq.ByID("01HZZZZZZZZZZZZZZZZZZZZZZZ"), 30*time.Second)
	if err != nil || j.State != "completed" || string(j.Result) != "7" || asked.Load() != 3 {
		t.Fatalf("answered %+v, %v after %d requests", j, err, asked.Load())
	}
	for _, status := range []int{http.StatusBadGateway, http.StatusGatewayTimeout} {
		status := status
		down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
		}))
		err := newClient(t, down.URL).Ack(ctx, "p", "a-receipt", nil)
		down.Close()
		var e *delayq.Error
		if !errors.Is(err, delayq.ErrUnavailable) || !errors.As(err, &e) || e.Status != status {
			t.Errorf("%d: %v", status, err)
		}
	}
}

// A worker whose clock is 20 s behind the server's (a stand-in proxy adds 20 s to each delivery's
// lease_deadline, which is what such a worker reads). It took the lease for 21 s and touched a 1 s
// lease after 7 s: the job was handed out again while its handler ran. The queue's lease_ms is
// what a worker without Lease goes by.
func TestAWorkerWhoseClockIsBehindTheServersKeepsTheLease(t *testing.T) {
	s := startServer(t)
	c := newClient(t, s.url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	must[*delayq.Config](t)(c.SetConfig(ctx, "skew", delayq.ConfigUpdate{LeaseMs: delayq.Ptr[int64](1000)}))
	job := must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "skew", delayq.NewJob{Payload: 1}))
	target, _ := url.Parse(s.url)
	skewed := httputil.NewSingleHostReverseProxy(target)
	skewed.ModifyResponse = func(r *http.Response) error {
		if !strings.HasSuffix(r.Request.URL.Path, "/reserve") || r.StatusCode != http.StatusOK {
			return nil
		}
		var answer map[string][]map[string]any
		if err := json.NewDecoder(r.Body).Decode(&answer); err != nil {
			return err
		}
		for _, j := range answer["jobs"] {
			j["lease_deadline"] = j["lease_deadline"].(float64) + 20_000
		}
		body, _ := json.Marshal(answer)
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Length", fmt.Sprint(len(body)))
		return nil
	}
	proxy := httptest.NewServer(skewed)
	defer proxy.Close()
	w, err := delayq.NewWorker(newClient(t, proxy.URL), "skew", func(context.Context, *delayq.Job) (any, error) {
		time.Sleep(2500 * time.Millisecond) // the work: more than two leases
		cancel()
		return "done", nil
	}, delayq.WorkerOptions{Concurrency: 2, Poll: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := awaitRun(t, runWorker(t, w, ctx)); err != nil {
		t.Fatal(err)
	}
	if w.Acked() != 1 || w.Redelivered() != 0 {
		t.Errorf("acked %d, delivered again while it ran %d", w.Acked(), w.Redelivered())
	}
	if _, err := c.Get(context.Background(), "skew", delayq.ByID(job.ID)); !errors.Is(err, delayq.ErrNotFound) {
		t.Errorf("the job is still there: %v", err)
	}
}
