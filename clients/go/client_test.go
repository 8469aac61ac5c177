package delayq_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

func newClient(t *testing.T, url string, opts ...delayq.Option) *delayq.Client {
	t.Helper()
	c, err := delayq.New(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func code(err error) delayq.Code {
	var e *delayq.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func TestEnqueueReserveAckWithAResultAndEveryJobField(t *testing.T) {
	s := startServer(t)
	c := newClient(t, s.url)
	ctx := context.Background()
	made := must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "orders", delayq.NewJob{
		Payload: map[string]any{"order": 42}, Key: "order-42", Headers: map[string]string{"v": "2"},
		MaxAttempts: 3, Priority: 7, Group: "tenant-1",
		Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", Tracestate: "k=v",
	}))
	if made.Duplicate || made.ID == "" {
		t.Fatalf("enqueue answered %+v", made)
	}
	dup := must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "orders", delayq.NewJob{Payload: 1, Key: "order-42"}))
	if !dup.Duplicate || dup.ID != made.ID {
		t.Fatalf("a second enqueue with the key answered %+v", dup)
	}
	info := must[*delayq.JobInfo](t)(c.Get(ctx, "orders", delayq.ByKey("order-42")))
	if info.State != "ready" || string(info.Payload) != `{"order":42}` || info.Headers["v"] != "2" || info.Priority != 7 ||
		info.Group != "tenant-1" || info.Tracestate != "k=v" || info.MaxAttempts != 3 {
		t.Fatalf("get answered %+v", info)
	}
	jobs := must[[]delayq.Job](t)(c.Reserve(ctx, "orders", delayq.ReserveOptions{Max: 10, Lease: 10 * time.Second}))
	if len(jobs) != 1 || jobs[0].ID != made.ID || jobs[0].Attempt != 1 || jobs[0].Key != "order-42" {
		t.Fatalf("reserve answered %+v", jobs)
	}
	var payload struct{ Order int }
	if err := jobs[0].Decode(&payload); err != nil || payload.Order != 42 {
		t.Fatalf("decoded %+v, %v", payload, err)
	}
	must[int64](t)(c.Touch(ctx, "orders", jobs[0].Receipt, delayq.TouchOptions{Lease: 20 * time.Second, Progress: 0.5}))
	if p := must[*delayq.JobInfo](t)(c.Get(ctx, "orders", delayq.ByID(made.ID))).Progress; string(p) != "0.5" {
		t.Fatalf("progress %s", p)
	}
	must[*delayq.Config](t)(c.SetConfig(ctx, "orders", delayq.ConfigUpdate{KeepCompletedMs: delayq.Ptr[int64](3_600_000)}))
	if err := c.Ack(ctx, "orders", jobs[0].Receipt, map[string]any{"paid": 1999}); err != nil {
		t.Fatal(err)
	}
	done := must[*delayq.JobInfo](t)(c.Get(ctx, "orders", delayq.ByID(made.ID)))
	if done.State != "completed" || string(done.Result) != `{"paid":1999}` || done.CompletedAt == 0 {
		t.Fatalf("the acked job is %+v", done)
	}
	err := c.Ack(ctx, "orders", jobs[0].Receipt, nil)
	if !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("a second ack answered %v", err)
	}
	stats := must[*delayq.QueueStats](t)(c.Stats(ctx, "orders"))
	if stats.Completed != 1 || stats.Counters.Acked != 1 || stats.Counters.Enqueued != 1 {
		t.Fatalf("stats %+v", stats)
	}
}

func TestBinaryPayloadsBatchesListingsDeadLettersAndSchedules(t *testing.T) {
	s := startServer(t)
	c := newClient(t, s.url)
	ctx := context.Background()
	bin := []byte{0, 255, 1}
	made := must[[]delayq.EnqueueResult](t)(c.EnqueueBatch(ctx, "b", []delayq.NewJob{
		{Payload: bin}, {Payload: json.RawMessage(`{"as":"written",  "x":1.50}`)}, {Payload: "later", Delay: time.Hour},
	}))
	if len(made) != 3 {
		t.Fatalf("batch answered %+v", made)
	}
	got := must[*delayq.JobInfo](t)(c.Get(ctx, "b", delayq.ByID(made[0].ID)))
	if string(got.Binary) != string(bin) || got.Payload != nil {
		t.Fatalf("binary payload came back as %+v", got)
	}
	if p := must[*delayq.JobInfo](t)(c.Get(ctx, "b", delayq.ByID(made[1].ID))).Payload; string(p) != `{"as":"written","x":1.50}` {
		t.Fatalf("a raw payload came back as %s", p)
	}
	jobs := must[[]delayq.Job](t)(c.Reserve(ctx, "b", delayq.ReserveOptions{Max: 10}))
	if len(jobs) != 2 {
		t.Fatalf("reserved %d", len(jobs))
	}
	r := must[*delayq.BatchResult](t)(c.NackBatch(ctx, "b", []string{jobs[0].Receipt, jobs[1].Receipt, "forged"}, delayq.NackOptions{Dead: true, Error: "no"}))
	if r.Done != 2 || len(r.Failed) != 1 || r.Failed[0].Receipt != "forged" || !errors.Is(r.Failed[0], delayq.ErrInvalidArgument) {
		t.Fatalf("nack batch answered %+v (%v)", r, r.Failed)
	}
	dead := must[[]delayq.JobInfo](t)(c.Dead(ctx, "b", 10))
	if len(dead) != 2 || dead[0].LastError != "no" {
		t.Fatalf("dead %+v", dead)
	}
	if n := must[int](t)(c.Replay(ctx, "b", dead[0].ID)); n != 1 {
		t.Fatalf("replayed %d", n)
	}
	if n := must[int](t)(c.Purge(ctx, "b")); n != 1 {
		t.Fatalf("purged %d", n)
	}
	var seen []string
	if err := c.EachJob(ctx, "b", "scheduled", func(j *delayq.JobInfo) error { seen = append(seen, j.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != made[2].ID {
		t.Fatalf("scheduled listing %v", seen)
	}
	moved := must[*delayq.JobInfo](t)(c.Reschedule(ctx, "b", delayq.ByID(made[2].ID), 2*time.Hour, time.Time{}))
	if moved.DueAt < time.Now().Add(90*time.Minute).UnixMilli() {
		t.Fatalf("rescheduled to %d", moved.DueAt)
	}
	if err := c.Cancel(ctx, "b", delayq.ByID(made[2].ID)); err != nil {
		t.Fatal(err)
	}
	sched := must[map[string]any](t)(c.PutSchedule(ctx, "b", "nightly", delayq.Schedule{Cron: "0 3 * * *", Timezone: "Europe/Berlin", Payload: map[string]int{"n": 1}}))
	if sched["cron"] != "0 3 * * *" {
		t.Fatalf("schedule %v", sched)
	}
	if all := must[[]map[string]any](t)(c.Schedules(ctx, "b")); len(all) != 1 {
		t.Fatalf("schedules %v", all)
	}
	must[map[string]any](t)(c.PauseSchedule(ctx, "b", "nightly"))
	if err := c.DeleteSchedule(ctx, "b", "nightly"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteQueue(ctx, "b", false); !errors.Is(err, delayq.ErrConflict) || !strings.Contains(err.Error(), "force") {
		t.Fatalf("deleting a queue that holds the replayed job answered %v", err)
	}
	if err := c.DeleteQueue(ctx, "b", true); err != nil {
		t.Fatal(err)
	}
	if v := must[map[string]any](t)(c.Version(ctx)); v["version"] == nil {
		t.Fatalf("version %v", v)
	}
}

// Hostile and extreme input: refused with an error that names what is wrong, before anything is
// sent or stored.
func TestHostileInputIsRefusedWithAClearErrorAndStoresNothing(t *testing.T) {
	s := startServer(t)
	c := newClient(t, s.url)
	ctx := context.Background()
	must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "h", delayq.NewJob{Payload: "the queue exists"}))
	cases := []struct {
		name string
		call func() error
		want delayq.Code
		text string
	}{
		{"empty queue", func() error { _, err := c.Enqueue(ctx, "", delayq.NewJob{}); return err }, delayq.CodeInvalidArgument, "queue name"},
		{"bad queue name", func() error { _, err := c.Enqueue(ctx, "a b/../c", delayq.NewJob{}); return err }, delayq.CodeInvalidArgument, "queue"},
		{"delay and deliver_at", func() error {
			_, err := c.Enqueue(ctx, "h", delayq.NewJob{Delay: time.Second, DeliverAt: time.Now()})
			return err
		}, delayq.CodeInvalidArgument, "not both"},
		{"int64 delay", func() error {
			_, err := c.Enqueue(ctx, "h", delayq.NewJob{Delay: time.Duration(math.MaxInt64)})
			return err
		}, delayq.CodeInvalidArgument, "delay"},
		{"negative delay", func() error { _, err := c.Enqueue(ctx, "h", delayq.NewJob{Delay: -time.Hour}); return err }, delayq.CodeInvalidArgument, "delay"},
		{"max_attempts", func() error { _, err := c.Enqueue(ctx, "h", delayq.NewJob{MaxAttempts: math.MinInt32}); return err }, delayq.CodeInvalidArgument, "max_attempts"},
		{"priority", func() error { _, err := c.Enqueue(ctx, "h", delayq.NewJob{Priority: 10}); return err }, delayq.CodeInvalidArgument, "priority"},
		{"tracestate alone", func() error { _, err := c.Enqueue(ctx, "h", delayq.NewJob{Tracestate: "k=v"}); return err }, delayq.CodeInvalidArgument, "Traceparent"},
		{"traceparent", func() error { _, err := c.Enqueue(ctx, "h", delayq.NewJob{Traceparent: "00-xyz"}); return err }, delayq.CodeInvalidArgument, "traceparent"},
		{"not JSON", func() error { _, err := c.Enqueue(ctx, "h", delayq.NewJob{Payload: json.RawMessage("{")}); return err }, delayq.CodeInvalidArgument, "JSON"},
		{"NaN", func() error { _, err := c.Enqueue(ctx, "h", delayq.NewJob{Payload: math.NaN()}); return err }, delayq.CodeInvalidArgument, "JSON"},
		{"too large", func() error {
			_, err := c.Enqueue(ctx, "h", delayq.NewJob{Payload: strings.Repeat("x", 2<<20)})
			return err
		}, delayq.CodeTooLarge, "payload"},
		{"no id or key", func() error { _, err := c.Get(ctx, "h", delayq.JobRef{}); return err }, delayq.CodeInvalidArgument, "id or its key"},
		{"id and key", func() error { _, err := c.Get(ctx, "h", delayq.JobRef{ID: "a", Key: "b"}); return err }, delayq.CodeInvalidArgument, "id or its key"},
		{"path in id", func() error { _, err := c.Get(ctx, "h", delayq.ByID("../../etc/passwd")); return err }, delayq.CodeInvalidArgument, "id"},
		{"no such job", func() error { _, err := c.Get(ctx, "h", delayq.ByID("01HZZZZZZZZZZZZZZZZZZZZZZZ")); return err }, delayq.CodeNotFound, "queue"},
		{"forged receipt", func() error { return c.Ack(ctx, "h", "forged", nil) }, delayq.CodeInvalidArgument, "receipt"},
		{"reserve max", func() error { _, err := c.Reserve(ctx, "h", delayq.ReserveOptions{Max: 1001}); return err }, delayq.CodeInvalidArgument, "max"},
		{"reserve wait", func() error {
			_, err := c.Reserve(ctx, "h", delayq.ReserveOptions{Wait: time.Duration(math.MaxInt64)})
			return err
		}, delayq.CodeInvalidArgument, "wait_ms"},
		{"negative wait", func() error { _, err := c.Wait(ctx, "h", delayq.ByID("x"), -1); return err }, delayq.CodeInvalidArgument, "timeout"},
		{"empty schedule name", func() error { _, err := c.PutSchedule(ctx, "h", "", delayq.Schedule{Every: time.Minute}); return err }, delayq.CodeInvalidArgument, "name"},
		{"bad cron", func() error { _, err := c.PutSchedule(ctx, "h", "s", delayq.Schedule{Cron: "61 * * * *"}); return err }, delayq.CodeInvalidArgument, "cron"},
		{"bad config", func() error {
			_, err := c.SetConfig(ctx, "h", delayq.ConfigUpdate{LeaseMs: delayq.Ptr[int64](math.MaxInt64)})
			return err
		}, delayq.CodeInvalidArgument, "lease_ms"},
	}
	for _, tc := range cases {
		err := tc.call()
		if code(err) != tc.want || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: got %v, want %s naming %q", tc.name, err, tc.want, tc.text)
		}
	}
	if qs := must[[]delayq.QueueStats](t)(c.Queues(ctx)); len(qs) != 1 || qs[0].Ready != 1 {
		t.Errorf("refused requests created queues: %+v", qs)
	}
	for _, bad := range []string{"ftp://x", "http://", "127.0.0.1:7070", "http://h:1/path"} {
		if _, err := delayq.New(bad); err == nil || !strings.Contains(err.Error(), "not http://HOST:PORT") {
			t.Errorf("New(%q) answered %v", bad, err)
		}
	}
	if _, err := delayq.New("http://127.0.0.1:1", delayq.WithCAFile("/etc/hostname")); err == nil || !strings.Contains(err.Error(), "https:// only") {
		t.Errorf("a CA file with http:// answered %v", err)
	}
	if _, err := delayq.New("https://127.0.0.1:1", delayq.WithCAFile("/nonexistent")); err == nil || !strings.Contains(err.Error(), "CA file") {
		t.Errorf("a missing CA file answered %v", err)
	}
}

func TestAWrongTokenIsUnauthenticatedAndTheTokenIsNeverPrinted(t *testing.T) {
	s := startServer(t, "--auth-token", "s3cret-token-value")
	ctx := context.Background()
	_, err := newClient(t, s.url, delayq.WithToken("wrong-token-value")).Stats(ctx, "q")
	if !errors.Is(err, delayq.ErrUnauthenticated) || strings.Contains(err.Error(), "token-value") {
		t.Fatalf("a wrong token answered %v", err)
	}
	if _, err := newClient(t, s.url, delayq.WithToken("s3cret-token-value")).Enqueue(ctx, "q", delayq.NewJob{Payload: 1}); err != nil {
		t.Fatal(err)
	}
}

func TestAServerThatIsNotThereIsUnavailableWithTheNetworkErrorInside(t *testing.T) {
	c := newClient(t, "http://127.0.0.1:1", delayq.WithTimeout(2*time.Second))
	_, err := c.Stats(context.Background(), "q")
	var e *delayq.Error
	if !errors.Is(err, delayq.ErrUnavailable) || !errors.As(err, &e) || e.Status != 0 || e.Err == nil {
		t.Fatalf("answered %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Stats(ctx, "q"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled context answered %v", err)
	}
}
