package delayq_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	delayq "github.com/delayq/delayq/clients/go"
)

// certs makes a CA and, signed by it, a certificate for 127.0.0.1, one for the name delayq.test,
// and a client certificate (openssl, as the other clients' tests do).
func certs(t *testing.T) func(name string) string {
	t.Helper()
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	openssl := func(args ...string) {
		if out, err := exec.Command("openssl", args...).CombinedOutput(); err != nil {
			t.Fatalf("openssl %v: %v\n%s", args, err, out)
		}
	}
	sign := func(who, subject, san string) {
		openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", path(who+".key"), "-out", path(who+".csr"))
		args := []string{"x509", "-req", "-in", path(who + ".csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
			"-CAcreateserial", "-days", "2", "-out", path(who + ".pem")}
		if san != "" {
			if err := os.WriteFile(path(who+".ext"), []byte(san+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			args = append(args, "-extfile", path(who+".ext"))
		}
		openssl(args...)
	}
	openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=delayq-test-ca",
		"-keyout", path("ca.key"), "-out", path("ca.pem"))
	sign("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1")
	sign("named", "/CN=delayq.test", "subjectAltName=DNS:delayq.test")
	sign("client", "/CN=delayq-client", "")
	return path
}

// Mutual TLS lets in only a client with a certificate the CA signed; answers far over 16 KB
// (TLS records) arrive whole.
func TestMutualTLSAndBigAnswers(t *testing.T) {
	f := certs(t)
	s := startServer(t, "--tls-cert", f("server.pem"), "--tls-key", f("server.key"), "--tls-client-ca", f("ca.pem"))
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("serving %s", s.url)
	}
	ctx := context.Background()
	c := newClient(t, s.url, delayq.WithCAFile(f("ca.pem")), delayq.WithClientCert(f("client.pem"), f("client.key")))
	big := strings.Repeat("é", 100_000)
	for i := 0; i < 5; i++ {
		must[*delayq.EnqueueResult](t)(c.Enqueue(ctx, "tls", delayq.NewJob{Payload: big}))
	}
	jobs := must[[]delayq.Job](t)(c.Reserve(ctx, "tls", delayq.ReserveOptions{Max: 5}))
	if len(jobs) != 5 {
		t.Fatalf("reserved %d", len(jobs))
	}
	for _, j := range jobs {
		var got string
		if err := j.Decode(&got); err != nil || got != big {
			t.Fatalf("a big payload came back cut: %d bytes, %v", len(got), err)
		}
	}
	anonymous := newClient(t, s.url, delayq.WithCAFile(f("ca.pem")))
	if _, err := anonymous.Stats(ctx, "tls"); !errors.Is(err, delayq.ErrUnavailable) {
		t.Fatalf("a client without a certificate answered %v", err)
	}
	untrusting := newClient(t, s.url, delayq.WithClientCert(f("client.pem"), f("client.key")))
	if _, err := untrusting.Stats(ctx, "tls"); !errors.Is(err, delayq.ErrUnavailable) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client that does not trust the CA answered %v", err)
	}
}

func TestAServerNameOtherThanTheHostAndTLSOptionsThatCannotWork(t *testing.T) {
	f := certs(t)
	s := startServer(t, "--tls-cert", f("named.pem"), "--tls-key", f("named.key"))
	ctx := context.Background()
	if _, err := newClient(t, s.url, delayq.WithCAFile(f("ca.pem"))).Stats(ctx, "q"); !errors.Is(err, delayq.ErrUnavailable) {
		t.Fatalf("a certificate for another name answered %v", err)
	}
	named := newClient(t, s.url, delayq.WithCAFile(f("ca.pem")), delayq.WithServerName("delayq.test"))
	must[*delayq.EnqueueResult](t)(named.Enqueue(ctx, "q", delayq.NewJob{Payload: 1}))
	for _, opts := range [][]delayq.Option{
		{delayq.WithClientCert("", f("client.key"))},
		{delayq.WithClientCert(f("client.pem"), f("ca.key"))},
		{delayq.WithCAFile(f("client.csr"))},
	} {
		if _, err := delayq.New(s.url, opts...); !errors.Is(err, delayq.ErrInvalidArgument) {
			t.Errorf("New took TLS options that cannot work: %v", err)
		}
	}
}
