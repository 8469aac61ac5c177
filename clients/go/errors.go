package delayq

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is the server's error code ("not_found", ...): docs/http-api.md, "Errors".
type Code string

// The codes a server answers. A client that meets a code it does not know keeps it as is.
const (
	CodeInvalidArgument      Code = "invalid_argument"
	CodeUnsupportedMediaType Code = "unsupported_media_type"
	CodeMethodNotAllowed     Code = "method_not_allowed"
	CodeTooLarge             Code = "too_large"
	CodeUnauthenticated      Code = "unauthenticated"
	CodeForbidden            Code = "forbidden"
	CodeNotFound             Code = "not_found"
	CodeConflict             Code = "conflict"
	CodeLeaseExpired         Code = "lease_expired"
	CodeResourceExhausted    Code = "resource_exhausted"
	CodeUnavailable          Code = "unavailable"
	CodeIOError              Code = "io_error"
	CodeInternal             Code = "internal"
)

// Error is every error this package returns for a server's answer, or for no answer at all
// (Code "unavailable", Status 0, the network error as Err). Match it with errors.As, or its kind
// with errors.Is and the Err* values below:
//
//	var e *delayq.Error
//	if errors.As(err, &e) { log.Print(e.Code, e.Message) }
//	if errors.Is(err, delayq.ErrLeaseExpired) { /* the job is someone else's now */ }
type Error struct {
	Code    Code
	Status  int    // the HTTP status; 0 when no answer came
	Message string // names what was wrong and what would be right
	Receipt string // in a BatchResult's Failed: the receipt it is about
	Err     error  // the network or TLS error behind an Unavailable without an answer
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Unwrap gives the network error behind an error without an answer.
func (e *Error) Unwrap() error { return e.Err }

// The kinds of error, for errors.Is. A kind covers its narrower codes: ErrInvalidArgument
// matches too_large too, ErrConflict matches lease_expired, ErrUnavailable matches io_error and
// a server that did not answer.
var (
	ErrInvalidArgument = &Error{Code: CodeInvalidArgument, Message: "invalid argument"}
	ErrTooLarge        = &Error{Code: CodeTooLarge, Message: "too large"}
	ErrUnauthenticated = &Error{Code: CodeUnauthenticated, Message: "unauthenticated"}
	ErrForbidden       = &Error{Code: CodeForbidden, Message: "forbidden"}
	ErrNotFound        = &Error{Code: CodeNotFound, Message: "not found"}
	ErrConflict        = &Error{Code: CodeConflict, Message: "conflict"}
	ErrLeaseExpired    = &Error{Code: CodeLeaseExpired, Message: "lease expired"}
	ErrOverloaded      = &Error{Code: CodeResourceExhausted, Message: "overloaded"}
	ErrUnavailable     = &Error{Code: CodeUnavailable, Message: "unavailable"}
)

var kinds = map[*Error][]Code{
	ErrInvalidArgument: {CodeInvalidArgument, CodeUnsupportedMediaType, CodeMethodNotAllowed, CodeTooLarge},
	ErrTooLarge:        {CodeTooLarge},
	ErrUnauthenticated: {CodeUnauthenticated},
	ErrForbidden:       {CodeForbidden},
	ErrNotFound:        {CodeNotFound},
	ErrConflict:        {CodeConflict, CodeLeaseExpired},
	ErrLeaseExpired:    {CodeLeaseExpired},
	ErrOverloaded:      {CodeResourceExhausted},
	ErrUnavailable:     {CodeUnavailable, CodeIOError},
}

// Is reports whether e is of the kind target names (one of the Err* values).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	codes, isKind := kinds[t]
	if !isKind {
		return e == t
	}
	for _, c := range codes {
		if e.Code == c {
			return true
		}
	}
	return false
}

var codeByStatus = map[int]Code{
	http.StatusBadRequest:            CodeInvalidArgument,
	http.StatusUnauthorized:          CodeUnauthenticated,
	http.StatusForbidden:             CodeForbidden,
	http.StatusNotFound:              CodeNotFound,
	http.StatusConflict:              CodeConflict,
	http.StatusRequestEntityTooLarge: CodeTooLarge,
	http.StatusTooManyRequests:       CodeResourceExhausted,
	http.StatusBadGateway:            CodeUnavailable, // a proxy's: delayq is down or restarting behind it
	http.StatusServiceUnavailable:    CodeUnavailable,
	http.StatusGatewayTimeout:        CodeUnavailable,
	http.StatusInsufficientStorage:   CodeResourceExhausted,
}

// errorOf is the error of an answer that is not 2xx: its error object, else its status.
func errorOf(status int, code, message string, body []byte) *Error {
	if code == "" {
		c, ok := codeByStatus[status]
		if !ok {
			c = Code(fmt.Sprintf("http_%d", status))
		}
		code = string(c)
		if message == "" {
			message = fmt.Sprintf("HTTP %d: %s", status, truncate(string(body), 200))
		}
	}
	return &Error{Code: Code(code), Status: status, Message: message}
}

// invalid is a refusal the client makes itself, before anything is sent.
func invalid(message string) *Error { return &Error{Code: CodeInvalidArgument, Message: message} }

func unavailable(format string, err error, args ...any) *Error {
	return &Error{Code: CodeUnavailable, Message: fmt.Sprintf(format, args...) + ": " + err.Error(), Err: err}
}

// fatal: refusals no retry mends (a wrong token, a bad option or queue name).
func fatal(err error) bool {
	return errors.Is(err, ErrUnauthenticated) || errors.Is(err, ErrForbidden) || errors.Is(err, ErrInvalidArgument)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
