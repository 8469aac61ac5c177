package delayq_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// server is a real `delayq serve` for a test, on a free loopback port, in a temporary data
// directory. The binary is $DELAYQ_BIN, or build/delayq of this repository.
type server struct {
	t     *testing.T
	dir   string
	port  int
	url   string
	extra []string
	cmd   *exec.Cmd
	log   strings.Builder
}

func binary() string {
	if b := os.Getenv("DELAYQ_BIN"); b != "" {
		return b
	}
	return filepath.Join("..", "..", "build", "delayq")
}

func startServer(t *testing.T, extra ...string) *server {
	t.Helper()
	s := &server{t: t, dir: t.TempDir(), extra: extra}
	s.start()
	t.Cleanup(s.stop)
	return s
}

var serving = regexp.MustCompile(`delayq serving (https?)://127\.0\.0\.1:(\d+)`)

func (s *server) start() {
	s.t.Helper()
	args := append([]string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", s.port), "--data", filepath.Join(s.dir, "data")}, s.extra...)
	cmd := exec.Command(binary(), args...)
	cmd.Stderr = &s.log
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("cannot start %s: %v", binary(), err)
	}
	s.cmd = cmd
	found := make(chan []string, 1)
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if m := serving.FindStringSubmatch(lines.Text()); m != nil {
				found <- m
			}
		}
	}()
	select {
	case m := <-found:
		fmt.Sscan(m[2], &s.port)
		s.url = fmt.Sprintf("%s://127.0.0.1:%d", m[1], s.port)
	case <-time.After(30 * time.Second): // a guard against a hang, not a synchronisation
		s.t.Fatalf("delayq serve did not start: %s", s.log.String())
	}
}

// kill is kill -9; start() again serves on the same port and data.
func (s *server) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
}

func (s *server) stop() {
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		_ = s.cmd.Wait()
	}
}
