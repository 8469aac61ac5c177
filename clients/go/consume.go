package delayq

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Job is a delivery, as Reserve hands it out: settle it with Ack, Nack, Touch or Release and its
// Receipt.
type Job struct {
	ID            string            `json:"id"`
	Receipt       string            `json:"receipt"`
	Payload       json.RawMessage   `json:"payload"`        // the JSON enqueued, verbatim; nil for a binary payload
	Binary        []byte            `json:"payload_base64"` // a binary payload
	Attempt       int               `json:"attempt"`
	MaxAttempts   int               `json:"max_attempts"`
	DueAt         int64             `json:"due_at"`
	Key           string            `json:"key"`
	Headers       map[string]string `json:"headers"`
	LeaseDeadline int64             `json:"lease_deadline"` // epoch ms: touch before it
	Priority      int               `json:"priority"`
	Group         string            `json:"group"`
	// The producer's W3C Trace Context: start the handler's span with a link to it.
	Traceparent string `json:"traceparent"`
	Tracestate  string `json:"tracestate"`
}

// Decode decodes the JSON payload into v.
func (j *Job) Decode(v any) error { return decodePayload(j.Payload, j.Binary, v) }

func (j *Job) UnmarshalJSON(data []byte) error {
	type plain Job
	if err := json.Unmarshal(data, (*plain)(j)); err != nil {
		return err
	}
	if j.Binary != nil {
		j.Payload = nil
	}
	return nil
}

// ReserveOptions: Max jobs (1..1000; 0 is 1), waiting up to Wait (at most 60 s) for the first,
// leased for Lease (0: the queue's lease_ms), an answer of at most MaxBytes of stored jobs
// (0: the server's 16 MiB; the first job always comes).
type ReserveOptions struct {
	Max      int
	Wait     time.Duration
	Lease    time.Duration
	MaxBytes int64
}

// Reserve takes up to Max ready jobs; none when Wait passed with nothing ready.
func (c *Client) Reserve(ctx context.Context, queue string, o ReserveOptions) ([]Job, error) {
	path, err := queuePath(queue)
	if err != nil {
		return nil, err
	}
	body := map[string]any{}
	if o.Max != 0 {
		body["max"] = o.Max
	}
	if o.Wait != 0 {
		body["wait_ms"] = ms(o.Wait)
	}
	if o.Lease != 0 {
		body["lease_ms"] = ms(o.Lease)
	}
	if o.MaxBytes != 0 {
		body["max_bytes"] = o.MaxBytes
	}
	var r struct {
		Jobs []Job `json:"jobs"`
	}
	if err := c.call(ctx, http.MethodPost, path+"/reserve", nil, body, &r, o.Wait); err != nil {
		return nil, err
	}
	return r.Jobs, nil
}

// BatchResult is a batch ack, nack, touch or release: not all or nothing. Failed holds an error
// for each receipt that failed (its Receipt field names it).
type BatchResult struct {
	Done   int
	Failed []*Error
}

type failure struct {
	Receipt string `json:"receipt"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func batchResult(done int, failed []failure) *BatchResult {
	r := &BatchResult{Done: done}
	for _, f := range failed {
		status := http.StatusBadRequest
		if f.Code == string(CodeLeaseExpired) || f.Code == string(CodeConflict) {
			status = http.StatusConflict
		} else if f.Code == string(CodeNotFound) {
			status = http.StatusNotFound
		}
		r.Failed = append(r.Failed, &Error{Code: Code(f.Code), Status: status, Message: f.Message, Receipt: f.Receipt})
	}
	return r
}

// batch sends a batch ack, nack, touch or release; the answer counts in the field of its verb.
func (c *Client) batch(ctx context.Context, queue, verb string, body map[string]any) (*BatchResult, error) {
	var r struct {
		Acked    int       `json:"acked"`
		Nacked   int       `json:"nacked"`
		Touched  int       `json:"touched"`
		Released int       `json:"released"`
		Failed   []failure `json:"failed"`
	}
	if err := c.settle(ctx, queue, verb, body, &r); err != nil {
		return nil, err
	}
	return batchResult(r.Acked+r.Nacked+r.Touched+r.Released, r.Failed), nil
}

func (c *Client) settle(ctx context.Context, queue, verb string, body map[string]any, out any) error {
	path, err := queuePath(queue)
	if err != nil {
		return err
	}
	return c.call(ctx, http.MethodPost, path+"/"+verb, nil, body, out, 0)
}

// Ack acknowledges a delivery: the job is done, and deleted, or kept completed with result (any
// value encoding/json takes, up to 64 KiB of JSON; nil: none) while the queue keeps completed
// jobs or someone waits for it. ErrLeaseExpired: the job was delivered again meanwhile.
func (c *Client) Ack(ctx context.Context, queue, receipt string, result any) error {
	body := map[string]any{"receipt": receipt}
	if result != nil {
		body["result"] = result
	}
	return c.settle(ctx, queue, "ack", body, nil)
}

// AckEntry is one ack of a batch, with its result (nil: none).
type AckEntry struct {
	Receipt string
	Result  any
}

// AckBatch acknowledges up to 1000 deliveries in one request.
func (c *Client) AckBatch(ctx context.Context, queue string, entries []AckEntry) (*BatchResult, error) {
	items := make([]any, 0, len(entries))
	for _, e := range entries {
		if e.Result == nil {
			items = append(items, e.Receipt)
		} else {
			items = append(items, map[string]any{"receipt": e.Receipt, "result": e.Result})
		}
	}
	return c.batch(ctx, queue, "ack", map[string]any{"receipts": items})
}

// NackOptions: retried after RetryIn (0: the queue's back-off), or dead now with Dead; Error
// becomes the job's last_error.
type NackOptions struct {
	RetryIn time.Duration
	Error   string
	Dead    bool
}

func (o *NackOptions) body() map[string]any {
	b := map[string]any{}
	if o.RetryIn != 0 {
		b["retry_in_ms"] = ms(o.RetryIn)
	}
	if o.Error != "" {
		b["error"] = o.Error
	}
	if o.Dead {
		b["dead"] = true
	}
	return b
}

// NackResult: State "scheduled" (retried at DueAt) or "dead".
type NackResult struct {
	State string `json:"state"`
	DueAt int64  `json:"due_at"`
}

// Nack ends a delivery without success: retried, or dead when out of attempts.
func (c *Client) Nack(ctx context.Context, queue, receipt string, o NackOptions) (*NackResult, error) {
	body := o.body()
	body["receipt"] = receipt
	var r NackResult
	if err := c.settle(ctx, queue, "nack", body, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// NackBatch nacks up to 1000 deliveries alike.
func (c *Client) NackBatch(ctx context.Context, queue string, receipts []string, o NackOptions) (*BatchResult, error) {
	body := o.body()
	body["receipts"] = receipts
	return c.batch(ctx, queue, "nack", body)
}

// TouchOptions: the new lease (0: the queue's lease_ms) and progress, any value encoding/json
// takes up to 4 KiB of JSON, shown on the job while this delivery holds it (nil keeps the last).
type TouchOptions struct {
	Lease    time.Duration
	Progress any
}

func (o *TouchOptions) body() map[string]any {
	b := map[string]any{}
	if o.Lease != 0 {
		b["lease_ms"] = ms(o.Lease)
	}
	if o.Progress != nil {
		b["progress"] = o.Progress
	}
	return b
}

// Touch extends a delivery's lease; it answers the new lease deadline (epoch ms).
func (c *Client) Touch(ctx context.Context, queue, receipt string, o TouchOptions) (int64, error) {
	body := o.body()
	body["receipt"] = receipt
	var r struct {
		LeaseDeadline int64 `json:"lease_deadline"`
	}
	err := c.settle(ctx, queue, "touch", body, &r)
	return r.LeaseDeadline, err
}

// TouchBatch touches up to 1000 deliveries alike.
func (c *Client) TouchBatch(ctx context.Context, queue string, receipts []string, o TouchOptions) (*BatchResult, error) {
	body := o.body()
	body["receipts"] = receipts
	return c.batch(ctx, queue, "touch", body)
}

// Release gives back deliveries that never reached a handler: ready again at once, no attempt
// used.
func (c *Client) Release(ctx context.Context, queue string, receipts ...string) (*BatchResult, error) {
	if len(receipts) == 0 {
		return nil, invalid("no receipt to release: give one or more")
	}
	return c.batch(ctx, queue, "release", map[string]any{"receipts": receipts})
}
