package delayq

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Histogram is a distribution in milliseconds (lateness, time held back by flow control).
type Histogram struct {
	Count   int64   `json:"count"`
	P50     float64 `json:"p50"`
	P90     float64 `json:"p90"`
	P99     float64 `json:"p99"`
	P999    float64 `json:"p999"`
	Max     float64 `json:"max"`
	Buckets []struct {
		Le    float64 `json:"le"`
		Count int64   `json:"count"`
	} `json:"buckets"` // cumulative
}

// QueueStats is a queue's counts, counters and lateness (GET /v1/queues/{q}).
type QueueStats struct {
	Name          string `json:"name"`
	Scheduled     int64  `json:"scheduled"`
	Ready         int64  `json:"ready"`
	Reserved      int64  `json:"reserved"`
	Dead          int64  `json:"dead"`
	Completed     int64  `json:"completed"`
	DueNext60s    int64  `json:"due_next_60s"`
	EarliestDueAt int64  `json:"earliest_due_at"`
	OldestReadyMs int64  `json:"oldest_ready_ms"`
	Paused        bool   `json:"paused"`
	Counters      struct {
		Enqueued    int64 `json:"enqueued"`
		Delivered   int64 `json:"delivered"`
		Acked       int64 `json:"acked"`
		Nacked      int64 `json:"nacked"`
		Redelivered int64 `json:"redelivered"`
		Dead        int64 `json:"dead"`
	} `json:"counters"`
	LatenessMs  Histogram `json:"lateness_ms"`
	LimitWaitMs Histogram `json:"limit_wait_ms"`
}

// Stats reads a queue's stats.
func (c *Client) Stats(ctx context.Context, queue string) (*QueueStats, error) {
	path, err := queuePath(queue)
	if err != nil {
		return nil, err
	}
	var s QueueStats
	if err := c.call(ctx, http.MethodGet, path, nil, nil, &s, 0); err != nil {
		return nil, err
	}
	return &s, nil
}

// Queues lists every queue with its stats.
func (c *Client) Queues(ctx context.Context) ([]QueueStats, error) {
	var r struct {
		Queues []QueueStats `json:"queues"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/queues", nil, nil, &r, 0)
	return r.Queues, err
}

// Backoff is the delay after failed attempt n: min(BaseMs * Factor^(n-1), MaxMs), jittered.
type Backoff struct {
	BaseMs int64   `json:"base_ms"`
	Factor float64 `json:"factor"`
	MaxMs  int64   `json:"max_ms"`
	Jitter float64 `json:"jitter"`
}

// Config is a queue's config (docs/http-api.md, "Queues", has each field's range and default).
type Config struct {
	MaxAttempts      int     `json:"max_attempts"`
	Backoff          Backoff `json:"backoff"`
	LeaseMs          int64   `json:"lease_ms"`
	MaxPayload       int64   `json:"max_payload"`
	DeadRetentionMs  int64   `json:"dead_retention_ms"`
	MaxDelayMs       int64   `json:"max_delay_ms"`
	RatePerS         float64 `json:"rate_per_s"`
	Burst            int64   `json:"burst"`
	MaxReserved      int64   `json:"max_reserved"`
	GroupMaxReserved int64   `json:"group_max_reserved"`
	PriorityAgingMs  int64   `json:"priority_aging_ms"`
	KeepCompletedMs  int64   `json:"keep_completed_ms"`
}

// ConfigUpdate changes the fields that are not nil; the others keep theirs. Ptr makes a pointer:
//
//	c.SetConfig(ctx, "orders", delayq.ConfigUpdate{MaxAttempts: delayq.Ptr(10)})
type ConfigUpdate struct {
	MaxAttempts      *int     `json:"max_attempts,omitempty"`
	Backoff          *Backoff `json:"backoff,omitempty"`
	LeaseMs          *int64   `json:"lease_ms,omitempty"`
	MaxPayload       *int64   `json:"max_payload,omitempty"`
	DeadRetentionMs  *int64   `json:"dead_retention_ms,omitempty"`
	MaxDelayMs       *int64   `json:"max_delay_ms,omitempty"`
	RatePerS         *float64 `json:"rate_per_s,omitempty"`
	Burst            *int64   `json:"burst,omitempty"`
	MaxReserved      *int64   `json:"max_reserved,omitempty"`
	GroupMaxReserved *int64   `json:"group_max_reserved,omitempty"`
	PriorityAgingMs  *int64   `json:"priority_aging_ms,omitempty"`
	KeepCompletedMs  *int64   `json:"keep_completed_ms,omitempty"`
}

// Ptr returns a pointer to v (for ConfigUpdate).
func Ptr[T any](v T) *T { return &v }

// Config reads a queue's config.
func (c *Client) Config(ctx context.Context, queue string) (*Config, error) {
	return c.config(ctx, queue, http.MethodGet, nil)
}

// SetConfig changes a queue's config; it answers the config as it is now.
func (c *Client) SetConfig(ctx context.Context, queue string, u ConfigUpdate) (*Config, error) {
	return c.config(ctx, queue, http.MethodPut, u)
}

func (c *Client) config(ctx context.Context, queue, method string, body any) (*Config, error) {
	path, err := queuePath(queue)
	if err != nil {
		return nil, err
	}
	var cfg Config
	if err := c.call(ctx, method, path+"/config", nil, body, &cfg, 0); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// Pause makes the queue hand out nothing until Resume.
func (c *Client) Pause(ctx context.Context, queue string) error { return c.post(ctx, queue, "/pause") }

// Resume makes a paused queue hand out again.
func (c *Client) Resume(ctx context.Context, queue string) error {
	return c.post(ctx, queue, "/resume")
}

func (c *Client) post(ctx context.Context, queue, suffix string) error {
	path, err := queuePath(queue)
	if err != nil {
		return err
	}
	return c.call(ctx, http.MethodPost, path+suffix, nil, nil, nil, 0)
}

// DeleteQueue deletes an empty queue (ErrConflict while it holds jobs), or with force its jobs too.
func (c *Client) DeleteQueue(ctx context.Context, queue string, force bool) error {
	path, err := queuePath(queue)
	if err != nil {
		return err
	}
	var query url.Values
	if force {
		query = url.Values{"force": {"true"}}
	}
	return c.call(ctx, http.MethodDelete, path, query, nil, nil, 0)
}

// JobPage is one page of a listing: NextCursor is "" on the last page.
type JobPage struct {
	Jobs       []JobInfo `json:"jobs"`
	NextCursor string    `json:"next_cursor"`
}

// Jobs lists one page of the queue's jobs in state ("scheduled", "ready", "reserved", "dead",
// "completed"), at most limit (1..1000; 0 is 100) from cursor ("" at first).
func (c *Client) Jobs(ctx context.Context, queue, state string, limit int, cursor string) (*JobPage, error) {
	path, err := queuePath(queue)
	if err != nil {
		return nil, err
	}
	query := url.Values{"state": {state}}
	if limit != 0 {
		query.Set("limit", fmt.Sprint(limit))
	}
	if cursor != "" {
		query.Set("cursor", cursor)
	}
	var p JobPage
	if err := c.call(ctx, http.MethodGet, path+"/jobs", query, nil, &p, 0); err != nil {
		return nil, err
	}
	return &p, nil
}

// EachJob calls fn for every job of the queue in state, a page at a time, until fn returns an
// error (which it returns).
func (c *Client) EachJob(ctx context.Context, queue, state string, fn func(*JobInfo) error) error {
	cursor := ""
	for {
		page, err := c.Jobs(ctx, queue, state, 0, cursor)
		if err != nil {
			return err
		}
		for i := range page.Jobs {
			if err := fn(&page.Jobs[i]); err != nil {
				return err
			}
		}
		if page.NextCursor == "" {
			return nil
		}
		cursor = page.NextCursor
	}
}

// Dead lists the first limit dead jobs, oldest death first (Jobs(…, "dead", …) pages on).
func (c *Client) Dead(ctx context.Context, queue string, limit int) ([]JobInfo, error) {
	page, err := c.Jobs(ctx, queue, "dead", limit, "")
	if err != nil {
		return nil, err
	}
	return page.Jobs, nil
}

// Replay makes dead jobs ready again (every dead job of the queue when ids is empty), attempts
// reset to 0; it answers how many.
func (c *Client) Replay(ctx context.Context, queue string, ids ...string) (int, error) {
	path, err := queuePath(queue)
	if err != nil {
		return 0, err
	}
	body := map[string]any{}
	if len(ids) > 0 {
		body["ids"] = ids
	}
	var r struct {
		Replayed int `json:"replayed"`
	}
	err = c.call(ctx, http.MethodPost, path+"/dead/replay", nil, body, &r, 0)
	return r.Replayed, err
}

// Purge deletes every dead job of the queue; it answers how many.
func (c *Client) Purge(ctx context.Context, queue string) (int, error) {
	path, err := queuePath(queue)
	if err != nil {
		return 0, err
	}
	var r struct {
		Purged int `json:"purged"`
	}
	err = c.call(ctx, http.MethodDelete, path+"/dead", nil, nil, &r, 0)
	return r.Purged, err
}

// Schedule is a recurring schedule to create or replace: Cron (with Timezone, default UTC) or
// Every; each run becomes a job with Payload (docs/http-api.md, "Recurring schedules").
type Schedule struct {
	Cron        string
	Every       time.Duration
	Timezone    string
	Payload     any
	Headers     map[string]string
	MaxAttempts int
	Priority    int
	Group       string
	Misfire     string // "skip", "run_once" (default) or "run_all"
	StartAt     time.Time
	EndAt       time.Time
	// A W3C Trace Context each run carries, as NewJob's (kept in the runs' headers).
	Traceparent string
	Tracestate  string
}

func (s *Schedule) body() (map[string]any, error) {
	if err := utf8Fields(map[string]string{"Group": s.Group, "Traceparent": s.Traceparent, "Tracestate": s.Tracestate},
		s.Headers); err != nil {
		return nil, err
	}
	if s.Tracestate != "" && s.Traceparent == "" {
		return nil, invalid("Tracestate was given without Traceparent: give both, or neither")
	}
	b := map[string]any{}
	set := func(name string, v any, given bool) {
		if given {
			b[name] = v
		}
	}
	set("cron", s.Cron, s.Cron != "")
	set("every", ms(s.Every), s.Every != 0)
	set("timezone", s.Timezone, s.Timezone != "")
	if bin, isBinary := s.Payload.([]byte); isBinary {
		set("payload_base64", bin, true) // as NewJob's: a binary payload
	} else {
		set("payload", s.Payload, s.Payload != nil)
	}
	set("headers", s.Headers, len(s.Headers) > 0)
	set("max_attempts", s.MaxAttempts, s.MaxAttempts != 0)
	set("priority", s.Priority, s.Priority != 0)
	set("group", s.Group, s.Group != "")
	set("misfire", s.Misfire, s.Misfire != "")
	set("traceparent", s.Traceparent, s.Traceparent != "")
	set("tracestate", s.Tracestate, s.Tracestate != "")
	for _, t := range []struct {
		name, field string
		at          time.Time
	}{{"start_at", "StartAt", s.StartAt}, {"end_at", "EndAt", s.EndAt}} {
		if !t.at.IsZero() {
			ms, err := epochMs(t.field, t.at)
			if err != nil {
				return nil, err
			}
			b[t.name] = ms
		}
	}
	return b, nil
}

func schedulePath(queue, name string) (string, error) {
	path, err := queuePath(queue)
	if err != nil {
		return "", err
	}
	if name == "" {
		return "", &Error{Code: CodeInvalidArgument, Message: "the schedule's name is empty: give one"}
	}
	if err := utf8Field("the schedule's name", name); err != nil {
		return "", err
	}
	return path + "/schedules/" + url.PathEscape(name), nil
}

// PutSchedule creates or replaces a schedule; it answers the schedule with its next runs, as the
// server's JSON.
func (c *Client) PutSchedule(ctx context.Context, queue, name string, s Schedule) (map[string]any, error) {
	body, err := s.body()
	if err != nil {
		return nil, err
	}
	return c.schedule(ctx, http.MethodPut, queue, name, "", body)
}

// GetSchedule reads a schedule, with its next runs and last run.
func (c *Client) GetSchedule(ctx context.Context, queue, name string) (map[string]any, error) {
	return c.schedule(ctx, http.MethodGet, queue, name, "", nil)
}

// PauseSchedule makes no more jobs of the schedule until ResumeSchedule.
func (c *Client) PauseSchedule(ctx context.Context, queue, name string) (map[string]any, error) {
	return c.schedule(ctx, http.MethodPost, queue, name, "/pause", nil)
}

// ResumeSchedule runs a paused schedule again, from now.
func (c *Client) ResumeSchedule(ctx context.Context, queue, name string) (map[string]any, error) {
	return c.schedule(ctx, http.MethodPost, queue, name, "/resume", nil)
}

// DeleteSchedule deletes a schedule; its jobs not yet due are cancelled.
func (c *Client) DeleteSchedule(ctx context.Context, queue, name string) error {
	_, err := c.schedule(ctx, http.MethodDelete, queue, name, "", nil)
	return err
}

func (c *Client) schedule(ctx context.Context, method, queue, name, suffix string, body any) (map[string]any, error) {
	path, err := schedulePath(queue, name)
	if err != nil {
		return nil, err
	}
	var r map[string]any
	if err := c.call(ctx, method, path+suffix, nil, body, &r, 0); err != nil {
		return nil, err
	}
	return r, nil
}

// Schedules lists the queue's schedules, each with its next runs.
func (c *Client) Schedules(ctx context.Context, queue string) ([]map[string]any, error) {
	path, err := queuePath(queue)
	if err != nil {
		return nil, err
	}
	var r struct {
		Schedules []map[string]any `json:"schedules"`
	}
	err = c.call(ctx, http.MethodGet, path+"/schedules", nil, nil, &r, 0)
	return r.Schedules, err
}
