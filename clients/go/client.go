// Package delayq is the Go client of delayq, a delay queue: a job handed in now becomes
// deliverable at a chosen moment, is delivered at least once to a consumer that acknowledges it,
// is retried with back-off, and goes dead when its attempts run out.
//
// A Client speaks the HTTP API (docs/http-api.md) of a `delayq serve`; a Worker runs a handler
// for each job of a queue. Standard library only. Every method takes a context: its cancel or
// deadline ends the call (and a waiting reserve or wait with it).
//
//	c, err := delayq.New("http://127.0.0.1:7070")
//	job, err := c.Enqueue(ctx, "orders", delayq.NewJob{Payload: order, Delay: 30 * time.Minute, Key: "order-42"})
//	outcome, err := c.Wait(ctx, "orders", delayq.ByID(job.ID), 5*time.Minute)
package delayq

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"
	"unicode/utf8"
)

// Client is a connection to a delayq server, safe to share between goroutines (its HTTP client
// keeps connections alive).
type Client struct {
	base    string // scheme://host:port, without a trailing slash
	token   string
	timeout time.Duration
	http    *http.Client
}

type settings struct {
	token, caFile, certFile, keyFile, serverName string
	timeout                                      time.Duration
	httpClient                                   *http.Client
}

// Option configures New.
type Option func(*settings)

// WithToken sends the server's bearer token (its --auth-token).
func WithToken(token string) Option { return func(s *settings) { s.token = token } }

// maxTimeout is the longest WithTimeout takes.
const maxTimeout = 24 * time.Hour

// WithTimeout bounds connecting and each answer (default 30 s, at most 24 h); a waiting reserve or
// wait gets its wait on top.
func WithTimeout(d time.Duration) Option { return func(s *settings) { s.timeout = d } }

// WithCAFile trusts the CAs of this PEM file instead of the system's (https:// only).
func WithCAFile(path string) Option { return func(s *settings) { s.caFile = path } }

// WithClientCert presents this certificate (and key; "" when the key is in certFile) to a server
// started with --tls-client-ca (https:// only).
func WithClientCert(certFile, keyFile string) Option {
	return func(s *settings) { s.certFile, s.keyFile = certFile, keyFile }
}

// WithServerName is the name the server's certificate must carry when it is not the URL's host
// (https:// only).
func WithServerName(name string) Option { return func(s *settings) { s.serverName = name } }

// WithHTTPClient uses this *http.Client (its transport, proxies, TLS) instead of one of New's own;
// the TLS options above are then not allowed.
func WithHTTPClient(c *http.Client) Option { return func(s *settings) { s.httpClient = c } }

// New returns a client of the server at rawURL ("http://127.0.0.1:7070" or https://). It checks
// the URL and the TLS files now: an error names what is wrong.
func New(rawURL string, opts ...Option) (*Client, error) {
	s := settings{timeout: 30 * time.Second}
	for _, o := range opts {
		o(&s)
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, invalid(fmt.Sprintf("url %q is not http://HOST:PORT or https://HOST:PORT", rawURL))
	}
	if s.timeout <= 0 || s.timeout > maxTimeout { // past a day, timeout + wait overflowed: every wait failed at once
		return nil, invalid(fmt.Sprintf("the timeout is %v; give a positive one up to %v (WithTimeout)", s.timeout, maxTimeout))
	}
	for _, ch := range s.token {
		if ch < 0x21 || ch > 0x7e {
			return nil, invalid("the token holds a space, a line end or a character outside printable ASCII " +
				"(read from a file with its newline?): give the token alone")
		}
	}
	tlsGiven := s.caFile != "" || s.certFile != "" || s.keyFile != "" || s.serverName != ""
	if tlsGiven && u.Scheme != "https" {
		return nil, invalid(fmt.Sprintf("the CA file, client certificate and server name are for https:// only, not %q", rawURL))
	}
	c := &Client{base: u.Scheme + "://" + u.Host, token: s.token, timeout: s.timeout, http: s.httpClient}
	if c.http != nil {
		if tlsGiven {
			return nil, invalid("give the TLS options or WithHTTPClient, not both")
		}
		return c, nil
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64
	if u.Scheme == "https" {
		config, err := tlsConfig(&s)
		if err != nil {
			return nil, err
		}
		transport.TLSClientConfig = config
	}
	c.http = &http.Client{Transport: transport}
	return c, nil
}

func tlsConfig(s *settings) (*tls.Config, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.serverName}
	if s.caFile != "" {
		pem, err := os.ReadFile(s.caFile)
		if err != nil {
			return nil, invalid(fmt.Sprintf("cannot read the CA file: %v (a PEM file of CAs is needed)", err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, invalid(fmt.Sprintf("the CA file %q holds no PEM certificate", s.caFile))
		}
		config.RootCAs = pool
	}
	if s.keyFile != "" && s.certFile == "" {
		return nil, invalid("a client key was given without its certificate: give both, or neither")
	}
	if s.certFile != "" {
		key := s.keyFile
		if key == "" {
			key = s.certFile
		}
		pair, err := tls.LoadX509KeyPair(s.certFile, key)
		if err != nil {
			return nil, invalid(fmt.Sprintf("cannot use the client certificate %q: %v (a PEM certificate and its unencrypted key are needed)", s.certFile, err))
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config, nil
}

// URL is the server's address, as given to New.
func (c *Client) URL() string { return c.base }

// call sends one request and decodes a 2xx answer's JSON into out (when not nil). wait is how long
// the server may hold the request on purpose (a waiting reserve or wait), on top of the timeout.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body, out any, wait time.Duration) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = marshal(body); err != nil {
			return &Error{Code: CodeInvalidArgument, Message: "the request cannot be sent as JSON: " + err.Error()}
		}
	}
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	if wait < 0 || wait > WaitMaxMs*time.Millisecond {
		wait = WaitMaxMs * time.Millisecond // the server holds no request longer (it refuses more)
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(parent, c.timeout+wait)
	defer cancel()
	// A kept-alive connection the server closed while idle fails before any answer: net/http sends
	// a request without a body again itself, and one with a body once more here.
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(payload))
		if err != nil {
			return &Error{Code: CodeInvalidArgument, Message: err.Error()}
		}
		if payload == nil {
			req.Body, req.ContentLength = http.NoBody, 0
		}
		if method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json")
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		res, err := c.http.Do(req)
		if err != nil {
			if parent.Err() != nil {
				return parent.Err() // the caller's cancel or deadline, as it is
			}
			if ctx.Err() == nil && attempt == 0 && errors.Is(err, io.EOF) {
				continue
			}
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return unavailable("no answer from %s in time", err, c.base)
			}
			return unavailable("cannot reach %s", err, c.base)
		}
		return c.answer(res, out)
	}
}

// Answers are at most this large (a reserve of many jobs is up to its max_bytes, 16 MiB by default).
const maxAnswer = 300 << 20

func (c *Client) answer(res *http.Response, out any) error {
	defer res.Body.Close()
	text, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return unavailable("%s broke off its answer", err, c.base)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(text, &e)
		return errorOf(res.StatusCode, e.Error.Code, e.Error.Message, text)
	}
	if out == nil || len(text) == 0 {
		return nil
	}
	if err := json.Unmarshal(text, out); err != nil {
		return &Error{Code: CodeInternal, Status: res.StatusCode, Message: fmt.Sprintf("the answer of %s is not the JSON expected: %v", c.base, err)}
	}
	return nil
}

// marshal is JSON as the server reads it: UTF-8 as written, not \u escapes of <, > and &.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

func queuePath(queue string) (string, error) {
	if queue == "" {
		return "", &Error{Code: CodeInvalidArgument, Message: "the queue name is empty: give a queue's name"}
	}
	if err := utf8Field("the queue name", queue); err != nil {
		return "", err
	}
	return "/v1/queues/" + url.PathEscape(queue), nil
}

// utf8Field refuses text that is not UTF-8: encoding/json would send U+FFFD in its place, so a job
// enqueued with such a key could never be read, cancelled or waited on by it.
func utf8Field(what, text string) error {
	if utf8.ValidString(text) {
		return nil
	}
	return &Error{Code: CodeInvalidArgument, Message: what + " is not UTF-8 text (" + strconv.QuoteToASCII(text) + "): give UTF-8"}
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// Version is the server's version, commit, store and durability (GET /v1/version).
func (c *Client) Version(ctx context.Context) (map[string]any, error) {
	var v map[string]any
	err := c.call(ctx, http.MethodGet, "/v1/version", nil, nil, &v, 0)
	return v, err
}

// Ready reports whether the server's store is open and can serve (GET /readyz).
func (c *Client) Ready(ctx context.Context) bool {
	return c.call(ctx, http.MethodGet, "/readyz", nil, nil, nil, 0) == nil
}
