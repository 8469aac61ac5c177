package delayq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The states a wait for an outcome ends on (Client.Wait), and the longest wait one request holds.
var FinalStates = []string{"completed", "dead", "cancelled"}

const WaitMaxMs = 60_000

// NewJob is a job to enqueue. Payload is any value encoding/json takes (its JSON is stored and
// handed back verbatim); json.RawMessage is sent as written but for its insignificant whitespace
// (encoding/json compacts it); []byte is a binary payload (sent as payload_base64, handed back
// in Job.Binary).
type NewJob struct {
	Payload any
	// When it becomes deliverable: after Delay, or at DeliverAt (not both); now without either.
	Delay     time.Duration
	DeliverAt time.Time
	// A key names at most one live job of the queue: an enqueue with a key that names one adds
	// nothing and answers that job (Duplicate). Replace rewrites that job instead; Debounce
	// rewrites it and moves it later, never earlier. KeyTTL keeps the key taken that long after
	// the job is acked or cancelled.
	Key      string
	Replace  bool
	Debounce bool
	KeyTTL   time.Duration
	Headers  map[string]string
	// 0: the queue's max_attempts.
	MaxAttempts int
	// 0..9 and a group (a tenant, say) order the ready jobs: groups take turns, higher priority
	// first within one.
	Priority int
	Group    string
	// The producer's W3C Trace Context, handed to the consumer.
	Traceparent string
	Tracestate  string
}

func (j *NewJob) body() (map[string]any, error) {
	if err := utf8Fields(map[string]string{"Key": j.Key, "Group": j.Group, "Traceparent": j.Traceparent,
		"Tracestate": j.Tracestate}, j.Headers); err != nil {
		return nil, err
	}
	b := map[string]any{}
	switch p := j.Payload.(type) {
	case []byte:
		b["payload_base64"] = p
	default:
		b["payload"] = p
	}
	if err := when(b, j.Delay, j.DeliverAt); err != nil {
		return nil, err
	}
	if j.Key != "" {
		b["key"] = j.Key
	}
	if j.Replace {
		b["replace"] = true
	}
	if j.Debounce {
		b["debounce"] = true
	}
	if j.KeyTTL != 0 {
		b["key_ttl_ms"] = ms(j.KeyTTL)
	}
	if len(j.Headers) > 0 {
		b["headers"] = j.Headers
	}
	if j.MaxAttempts != 0 {
		b["max_attempts"] = j.MaxAttempts
	}
	if j.Priority != 0 {
		b["priority"] = j.Priority
	}
	if j.Group != "" {
		b["group"] = j.Group
	}
	if j.Traceparent != "" {
		b["traceparent"] = j.Traceparent
		if j.Tracestate != "" {
			b["tracestate"] = j.Tracestate
		}
	} else if j.Tracestate != "" {
		return nil, &Error{Code: CodeInvalidArgument, Message: "Tracestate was given without Traceparent: give both, or neither"}
	}
	return b, nil
}

// utf8Fields refuses named fields or headers that are not UTF-8 (utf8Field).
func utf8Fields(fields map[string]string, headers map[string]string) error {
	for name, text := range fields {
		if err := utf8Field(name, text); err != nil {
			return err
		}
	}
	for name, value := range headers {
		if err := utf8Field("a header's name", name); err != nil {
			return err
		}
		if err := utf8Field("header "+strconv.QuoteToASCII(name), value); err != nil {
			return err
		}
	}
	return nil
}

func when(b map[string]any, delay time.Duration, at time.Time) error {
	switch {
	case delay != 0 && !at.IsZero():
		return &Error{Code: CodeInvalidArgument, Message: "give Delay or DeliverAt, not both"}
	case delay != 0:
		b["delay_ms"] = ms(delay)
	case !at.IsZero():
		ms, err := epochMs("DeliverAt", at)
		if err != nil {
			return err
		}
		b["deliver_at"] = ms
	}
	return nil
}

// epochMs is t in epoch milliseconds, or a refusal naming field when that overflows an int64
// (time.UnixMilli wraps around: a moment far ahead would be "due now").
func epochMs(field string, t time.Time) (int64, error) {
	const limit = math.MaxInt64 / 1000
	if sec := t.Unix(); sec > limit || sec < -limit {
		return 0, invalid(fmt.Sprintf("%s is %v, beyond the milliseconds an int64 holds", field, t))
	}
	return t.UnixMilli(), nil
}

// EnqueueResult is what an enqueue answers.
type EnqueueResult struct {
	ID        string `json:"id"`
	DueAt     int64  `json:"due_at"`    // epoch milliseconds
	Duplicate bool   `json:"duplicate"` // the key named a live job: this is that job
	Replaced  bool   `json:"replaced"`
}

// Enqueue hands in one job.
func (c *Client) Enqueue(ctx context.Context, queue string, job NewJob) (*EnqueueResult, error) {
	path, err := queuePath(queue)
	if err != nil {
		return nil, err
	}
	body, err := job.body()
	if err != nil {
		return nil, err
	}
	var r EnqueueResult
	if err := c.call(ctx, http.MethodPost, path+"/jobs", nil, body, &r, 0); err != nil {
		return nil, err
	}
	return &r, nil
}

// EnqueueBatch hands in up to 1000 jobs at once, all or none.
func (c *Client) EnqueueBatch(ctx context.Context, queue string, jobs []NewJob) ([]EnqueueResult, error) {
	path, err := queuePath(queue)
	if err != nil {
		return nil, err
	}
	bodies := make([]map[string]any, 0, len(jobs))
	for i := range jobs {
		b, err := jobs[i].body()
		if err != nil {
			return nil, fmt.Errorf("jobs[%d]: %w", i, err)
		}
		bodies = append(bodies, b)
	}
	var r struct {
		Jobs []EnqueueResult `json:"jobs"`
	}
	if err := c.call(ctx, http.MethodPost, path+"/jobs", nil, map[string]any{"jobs": bodies}, &r, 0); err != nil {
		return nil, err
	}
	return r.Jobs, nil
}

// JobRef names a job by its id or by its key: ByID, ByKey.
type JobRef struct{ ID, Key string }

func ByID(id string) JobRef   { return JobRef{ID: id} }
func ByKey(key string) JobRef { return JobRef{Key: key} }

func jobPath(queue string, ref JobRef) (string, url.Values, error) {
	path, err := queuePath(queue)
	if err != nil {
		return "", nil, err
	}
	if (ref.ID == "") == (ref.Key == "") {
		return "", nil, &Error{Code: CodeInvalidArgument, Message: "give the job's id or its key (one of them)"}
	}
	if ref.ID != "" {
		if err := utf8Field("the job id", ref.ID); err != nil {
			return "", nil, err
		}
		return path + "/jobs/" + url.PathEscape(ref.ID), url.Values{}, nil
	}
	if err := utf8Field("the key", ref.Key); err != nil {
		return "", nil, err
	}
	return path + "/jobs", url.Values{"key": {ref.Key}}, nil
}

// JobInfo is a job as Get, Wait and the listings show it.
type JobInfo struct {
	ID          string            `json:"id"`
	Queue       string            `json:"queue"`
	State       string            `json:"state"` // scheduled, ready, reserved, dead, completed; cancelled (a wait only)
	DueAt       int64             `json:"due_at"`
	Attempt     int               `json:"attempt"`
	MaxAttempts int               `json:"max_attempts"`
	Payload     json.RawMessage   `json:"payload"`        // the JSON enqueued, verbatim; nil for a binary payload
	Binary      []byte            `json:"payload_base64"` // a binary payload
	Key         string            `json:"key"`
	Headers     map[string]string `json:"headers"`
	CreatedAt   int64             `json:"created_at"`
	LastError   string            `json:"last_error"`
	// Epoch ms; 0 when not reserved, not dead, not completed.
	LeaseDeadline int64  `json:"lease_deadline"`
	DeadAt        int64  `json:"dead_at"`
	CompletedAt   int64  `json:"completed_at"`
	Priority      int    `json:"priority"`
	Group         string `json:"group"`
	Traceparent   string `json:"traceparent"`
	Tracestate    string `json:"tracestate"`
	// While reserved: its delivery's last progress (Touch). When completed: its ack's result.
	// nil when none.
	Progress json.RawMessage `json:"progress"`
	Result   json.RawMessage `json:"result"`
}

// Final reports whether the job is completed, dead or cancelled.
func (j *JobInfo) Final() bool {
	for _, s := range FinalStates {
		if j.State == s {
			return true
		}
	}
	return false
}

// Decode decodes the JSON payload into v.
func (j *JobInfo) Decode(v any) error { return decodePayload(j.Payload, j.Binary, v) }

func decodePayload(payload json.RawMessage, binary []byte, v any) error {
	if binary != nil {
		return errors.New("delayq: the payload is binary: read Binary")
	}
	return json.Unmarshal(payload, v)
}

func (j *JobInfo) UnmarshalJSON(data []byte) error {
	type plain JobInfo
	if err := json.Unmarshal(data, (*plain)(j)); err != nil {
		return err
	}
	j.Progress, j.Result = nullToNil(j.Progress), nullToNil(j.Result)
	if j.Binary != nil {
		j.Payload = nil
	}
	return nil
}

func nullToNil(raw json.RawMessage) json.RawMessage {
	if string(raw) == "null" {
		return nil
	}
	return raw
}

// Get reads a job.
func (c *Client) Get(ctx context.Context, queue string, ref JobRef) (*JobInfo, error) {
	path, query, err := jobPath(queue, ref)
	if err != nil {
		return nil, err
	}
	var j JobInfo
	if err := c.call(ctx, http.MethodGet, path, query, nil, &j, 0); err != nil {
		return nil, err
	}
	return &j, nil
}

// Wait waits for the job's outcome: it answers the job once it is completed (Result is the one
// its ack carried, kept for this wait even when the queue keeps no completed jobs), dead or
// cancelled, or as it then is when timeout ends: look at State (or Final). The server is woken
// by the job's end and never polls; a wait longer than 60 s is made of waits of 60 s. A server
// that restarts (Unavailable) or is full (Overloaded) meanwhile is asked again until the
// timeout. ErrNotFound when there is no such job (or it ended, not kept, before the wait began).
// A wait by key waits for the job the key named when it began.
func (c *Client) Wait(ctx context.Context, queue string, ref JobRef, timeout time.Duration) (*JobInfo, error) {
	if timeout < 0 {
		return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("the timeout is %v; give 0 or more", timeout)}
	}
	path, query, err := jobPath(queue, ref)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	pause := 100 * time.Millisecond
	for {
		waitMs := time.Until(deadline).Milliseconds()
		if waitMs < 0 {
			waitMs = 0
		} else if waitMs > WaitMaxMs {
			waitMs = WaitMaxMs
		}
		query.Set("wait_ms", fmt.Sprint(waitMs))
		var j JobInfo
		err := c.call(ctx, http.MethodGet, path, query, nil, &j, time.Duration(waitMs)*time.Millisecond)
		if err != nil {
			// Asked again after a pause until the timeout (a server starting again, or one at
			// --max-waiting), the last time without waiting (wait_ms 0 is a plain read, never a
			// 429); that last one's failure is the answer.
			if !(errors.Is(err, ErrUnavailable) || errors.Is(err, ErrOverloaded)) || waitMs == 0 {
				return nil, err
			}
			if left := time.Until(deadline); left < pause {
				pause = maxDuration(left, 0)
			}
			if err := sleep(ctx, pause); err != nil {
				return nil, err
			}
			pause = minDuration(pause*2, 2*time.Second)
			continue
		}
		if j.Final() || !time.Now().Before(deadline) {
			return &j, nil
		}
		if path, query, err = jobPath(queue, ByID(j.ID)); err != nil { // by key: the job it named at first
			return nil, err
		}
	}
}

// Cancel deletes a scheduled, ready or dead job. ErrNotFound when there is none; ErrConflict
// while it is reserved.
func (c *Client) Cancel(ctx context.Context, queue string, ref JobRef) error {
	path, query, err := jobPath(queue, ref)
	if err != nil {
		return err
	}
	return c.call(ctx, http.MethodDelete, path, query, nil, nil, 0)
}

// Reschedule moves a scheduled or ready job's due time to after delay, or to at (give one);
// it answers the job as it is now.
func (c *Client) Reschedule(ctx context.Context, queue string, ref JobRef, delay time.Duration, at time.Time) (*JobInfo, error) {
	path, query, err := jobPath(queue, ref)
	if err != nil {
		return nil, err
	}
	body := map[string]any{}
	if err := when(body, delay, at); err != nil {
		return nil, err
	}
	if len(body) == 0 {
		body["delay_ms"] = 0 // due now
	}
	var j JobInfo
	if err := c.call(ctx, http.MethodPatch, path, query, body, &j, 0); err != nil {
		return nil, err
	}
	return &j, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func maxDuration(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

func minDuration(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}
