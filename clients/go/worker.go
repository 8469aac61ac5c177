package delayq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Handler does a job's work. It returns the job's result (nil: none; any value encoding/json
// takes, up to 64 KiB of JSON) and the job is acked, or an error and the job is nacked with the
// error's text as its last_error (the queue's back-off decides when it comes back, or it goes
// dead). A panic is an error, and so are a panic(nil) and a runtime.Goexit. ctx is cancelled when the job is no longer this handler's (its
// lease was lost: another consumer may have it); a Worker's shutdown does not cancel it.
type Handler func(ctx context.Context, job *Job) (result any, err error)

// WorkerOptions configures NewWorker. Zero values take the defaults.
type WorkerOptions struct {
	Concurrency int           // handlers at a time (default 1, at most 1000)
	Lease       time.Duration // each delivery's lease (default: the queue's lease_ms)
	// How long one reserve waits for a job (default and most 5 s): a shutdown waits for the
	// reserves under way, so that no job is leased to a worker that is gone.
	Poll time.Duration
	// Told of each handler's error and each result that could not be kept (the job is then acked
	// without it). Called from the handler's goroutine.
	OnError func(job *Job, err error)
}

// Worker runs a Handler for each job of a queue, Concurrency at a time: it reserves by
// long-polling, keeps each running job's lease alive (a touch every third of it), acks or nacks
// by the handler's answer, and backs off (100 ms doubling to 5 s) while the server cannot be
// reached or cannot serve. Run until its context is cancelled: then it takes no new job, lets the
// running handlers finish and settles them, and returns nil. A refusal no retry mends (a wrong
// token, a bad queue name or option: ErrUnauthenticated, ErrForbidden, ErrInvalidArgument) stops
// it, and Run returns that error.
type Worker struct {
	client  *Client
	queue   string
	handler Handler
	o       WorkerOptions

	acked, nacked, errs atomic.Int64

	mu          sync.Mutex
	running     map[string]*running // job id -> its handler's delivery (guarded by mu)
	failed      error
	queueLease  time.Duration // the queue's lease_ms as last read, and when (guarded by mu)
	leaseReadAt time.Time
	redelivered atomic.Int64
}

type running struct {
	receipt string // the newest delivery's (guarded by Worker.mu)
	lease   time.Duration
	lost    context.CancelFunc
}

// MaxResultBytes is the most JSON a result may be (the server's limit).
const MaxResultBytes = 65536

// NewWorker checks the options: an error names a bad one.
func NewWorker(c *Client, queue string, h Handler, o WorkerOptions) (*Worker, error) {
	if _, err := queuePath(queue); err != nil {
		return nil, err
	}
	if c == nil || h == nil {
		return nil, invalid("the client and the handler are needed, not nil")
	}
	if o.Concurrency == 0 {
		o.Concurrency = 1
	}
	if o.Concurrency < 1 || o.Concurrency > 1000 {
		return nil, invalid(fmt.Sprintf("Concurrency is %d; give 1..1000", o.Concurrency))
	}
	if o.Lease != 0 && (o.Lease < time.Second || o.Lease > 12*time.Hour) {
		return nil, invalid(fmt.Sprintf("Lease is %v; give 1s..12h, or 0 for the queue's", o.Lease))
	}
	if o.Poll <= 0 || o.Poll > 5*time.Second {
		o.Poll = 5 * time.Second
	}
	return &Worker{client: c, queue: queue, handler: h, o: o, running: map[string]*running{}}, nil
}

// Acked, Nacked and Errors count the jobs acked and nacked, and the calls to the server that
// failed (each retried, or left to the lease); Redelivered the deliveries of a job whose handler
// was running here (settled by that handler, not run again).
func (w *Worker) Acked() int64       { return w.acked.Load() }
func (w *Worker) Nacked() int64      { return w.nacked.Load() }
func (w *Worker) Errors() int64      { return w.errs.Load() }
func (w *Worker) Redelivered() int64 { return w.redelivered.Load() }

// Run works until ctx is cancelled (nil) or a refusal no retry mends (that error).
func (w *Worker) Run(ctx context.Context) error {
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < w.o.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(stop, cancel)
		}()
	}
	wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// One slot: reserve a job, run it, settle it, until stopped.
func (w *Worker) loop(stop context.Context, fail context.CancelFunc) {
	pause := 100 * time.Millisecond
	for stop.Err() == nil {
		jobs, err := w.reserve(stop)
		if err != nil {
			w.errs.Add(1)
			if fatal(err) {
				w.mu.Lock()
				if w.failed == nil {
					w.failed = err
				}
				w.mu.Unlock()
				fail()
				return
			}
			_ = sleep(stop, pause) // the server is down or cannot serve: again shortly
			pause = minDuration(pause*2, 5*time.Second)
			continue
		}
		pause = 100 * time.Millisecond
		for i := range jobs {
			w.handle(&jobs[i])
		}
	}
}

// reserve asks for one job. Not cut off by the stop at once (a reserve cut off could lease a job to
// no one until its lease ends), but Poll and a second after it at most: a server that hangs (stopped,
// swapping, a network that drops packets) does not hold a shutdown for the client's whole timeout.
func (w *Worker) reserve(stop context.Context) ([]Job, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-stop.Done():
		}
		grace := time.NewTimer(w.o.Poll + time.Second)
		defer grace.Stop()
		select {
		case <-ctx.Done():
		case <-grace.C:
			cancel()
		}
	}()
	return w.client.Reserve(ctx, w.queue, ReserveOptions{Max: 1, Wait: w.o.Poll, Lease: w.o.Lease})
}

// A job the server hands out again while its handler runs here (its lease ran out: the server was
// stopped or slow) is not run twice: the running handler settles the newest delivery.
func (w *Worker) handle(job *Job) {
	ctx, lost := context.WithCancel(context.Background())
	defer lost()
	lease := w.leaseOf(job)
	w.mu.Lock()
	if r, runs := w.running[job.ID]; runs {
		r.receipt = job.Receipt
		w.mu.Unlock()
		w.redelivered.Add(1)
		return
	}
	r := &running{receipt: job.Receipt, lease: lease, lost: lost}
	w.running[job.ID] = r
	w.mu.Unlock()
	done := make(chan struct{})
	go w.keepAlive(r, done)
	result, err := w.call(ctx, job)
	close(done)
	w.mu.Lock()
	delete(w.running, job.ID)
	receipt := r.receipt
	w.mu.Unlock()
	w.settle(job, receipt, lease, result, err)
}

// leaseOf is the lease a delivery got: Lease, or the queue's lease_ms, read from its config at most
// every 10 s (as the C++ worker does). Not the delivery's lease_deadline less this clock: that is
// the server's clock, and with this one 20 s behind a touch came after the lease had run out (a
// hostile try saw the job run by another consumer meanwhile). The deadline serves only while the
// config cannot be read.
func (w *Worker) leaseOf(job *Job) time.Duration {
	if w.o.Lease != 0 {
		return w.o.Lease
	}
	w.mu.Lock()
	lease, fresh := w.queueLease, time.Since(w.leaseReadAt) < 10*time.Second
	w.mu.Unlock()
	if !fresh || lease == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), w.client.timeout)
		config, err := w.client.Config(ctx, w.queue)
		cancel()
		if err == nil && config.LeaseMs > 0 {
			lease = time.Duration(config.LeaseMs) * time.Millisecond
			w.mu.Lock()
			w.queueLease, w.leaseReadAt = lease, time.Now()
			w.mu.Unlock()
		} else if lease == 0 && job.LeaseDeadline > 0 {
			lease = time.Until(time.UnixMilli(job.LeaseDeadline))
		}
	}
	return maxDuration(lease, time.Second)
}

// call runs the handler on a goroutine of its own, a panic turned into an error. Also a panic(nil)
// (before Go 1.21 recover answers nil for it: the job was once acked as done) and a
// runtime.Goexit (t.FailNow, a log.Fatal's kin in a library): that one would have ended the slot
// and left its job's lease kept alive for as long as the process lived.
func (w *Worker) call(ctx context.Context, job *Job) (any, error) {
	type answer struct {
		result any
		err    error
	}
	out := make(chan answer, 1)
	go func() {
		returned := false
		defer func() {
			if returned {
				return
			}
			if p := recover(); p != nil {
				out <- answer{nil, fmt.Errorf("panic: %v", p)}
				return
			}
			out <- answer{nil, errors.New("panic: the handler panicked with nil or called runtime.Goexit")}
		}()
		result, err := w.handler(ctx, job)
		returned = true
		out <- answer{result, err}
	}()
	a := <-out
	return a.result, a.err
}

func (w *Worker) keepAlive(r *running, done <-chan struct{}) {
	t := time.NewTicker(r.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		w.mu.Lock()
		receipt := r.receipt
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), r.lease/3)
		_, err := w.client.Touch(ctx, w.queue, receipt, TouchOptions{Lease: r.lease})
		cancel()
		if errors.Is(err, ErrLeaseExpired) || errors.Is(err, ErrNotFound) {
			r.lost() // the job is no longer this handler's (unless the server hands it here again)
			return
		}
		if err != nil {
			w.errs.Add(1)
		}
	}
}

func (w *Worker) settle(job *Job, receipt string, lease time.Duration, result any, handlerErr error) {
	var err error
	if handlerErr != nil {
		w.report(job, handlerErr)
		text := handlerErr.Error()
		if len(text) > 4000 {
			text = text[:4000]
		}
		if err = w.retrying(lease, func(ctx context.Context) error {
			_, err := w.client.Nack(ctx, w.queue, receipt, NackOptions{Error: text})
			return err
		}); err == nil {
			w.nacked.Add(1)
		}
	} else {
		result = w.keepable(job, result)
		err = w.retrying(lease, func(ctx context.Context) error { return w.client.Ack(ctx, w.queue, receipt, result) })
		if errors.Is(err, ErrInvalidArgument) && result != nil { // a result the server would not keep
			w.errs.Add(1)
			w.report(job, err)
			err = w.retrying(lease, func(ctx context.Context) error { return w.client.Ack(ctx, w.queue, receipt, nil) })
		}
		if err == nil {
			w.acked.Add(1)
		}
	}
	if err != nil && !errors.Is(err, ErrLeaseExpired) && !errors.Is(err, ErrNotFound) {
		w.errs.Add(1) // unsettled: the lease runs out and the job is delivered again
	}
}

// retrying sends an ack or nack again, 100 ms doubling to 2 s, while the server cannot take it
// (down a moment, restarting) and the delivery's lease may still hold: its receipt stays good over
// a restart, and a job done once is then not delivered again a lease later.
func (w *Worker) retrying(lease time.Duration, call func(ctx context.Context) error) error {
	until := time.Now().Add(lease)
	pause := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), w.client.timeout)
		err := call(ctx)
		cancel()
		if !errors.Is(err, ErrUnavailable) || time.Now().Add(pause).After(until) {
			return err
		}
		w.errs.Add(1)
		time.Sleep(pause) // the back-off before the next try
		pause = minDuration(pause*2, 2*time.Second)
	}
}

// keepable is the result, or nil (reported) when it is not JSON or is too large.
func (w *Worker) keepable(job *Job, result any) any {
	if result == nil {
		return nil
	}
	text, err := marshal(result)
	if err == nil && len(text) > MaxResultBytes {
		err = fmt.Errorf("the result of job %s is %d bytes of JSON; at most %d are kept", job.ID, len(text), MaxResultBytes)
	}
	if err != nil {
		w.errs.Add(1)
		w.report(job, err)
		return nil
	}
	return result
}

func (w *Worker) report(job *Job, err error) {
	if w.o.OnError != nil {
		w.o.OnError(job, err)
	}
}

// Progress reports, from a handler, how far it has got with job (any value encoding/json takes,
// up to 4 KiB of JSON), shown on the job while it runs; it touches the lease too.
func (w *Worker) Progress(ctx context.Context, job *Job, value any) error {
	w.mu.Lock()
	r := w.running[job.ID]
	var receipt string
	if r != nil {
		receipt = r.receipt
	}
	w.mu.Unlock()
	if r == nil {
		return &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("job %s is not running in this worker", job.ID)}
	}
	_, err := w.client.Touch(ctx, w.queue, receipt, TouchOptions{Lease: r.lease, Progress: value})
	return err
}
