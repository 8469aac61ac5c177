package delayq_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's way: an application module of its own that requires this client through a
// replace directive (no module proxy), running examples/ordertimeout against a real server.
func TestTheOrderTimeoutExampleRunsAsAnApplicationWouldBuildIt(t *testing.T) {
	s := startServer(t)
	client, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	app := t.TempDir()
	gomod := "module example.com/app\n\ngo 1.19\n\nrequire github.com/delayq/delayq/clients/go v0.0.0\n\n" +
		"replace github.com/delayq/delayq/clients/go => " + client + "\n"
	if err := os.WriteFile(filepath.Join(app, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	source, err := os.ReadFile(filepath.Join("examples", "ordertimeout", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "main.go"), source, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", ".", s.url)
	cmd.Dir = app
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, out)
	}
	for _, want := range []string{"duplicate: true", `order 42: completed {"attempt":1,"cancelled":42}`,
		"dead: order-bad order id not-a-number is not a number", "replayed 1 then completed", "done: acked 2 nacked 2"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the example printed no %q:\n%s", want, out)
		}
	}
}
