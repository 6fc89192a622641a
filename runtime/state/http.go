package state

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/picomq/pico-connectors/internal/defaults"
	"github.com/picomq/pico-connectors/runtime/backoff"
	"github.com/picomq/pico-connectors/runtime/confkit"
)

// HTTPConfig configures an HTTPStore.
type HTTPConfig struct {
	// URL is the base URL; the blob of source KEY is at URL/KEY.
	URL string
	// Timeout bounds one request. Zero means 5s.
	Timeout time.Duration
	// MaxAttempts is the number of tries per Load or Save. Zero means 5.
	MaxAttempts int
	// RetryDelay is the delay before the second attempt, doubled before
	// each further one, with 20 percent jitter, capped at MaxDelay. Zero
	// means 200ms.
	RetryDelay time.Duration
	// MaxDelay caps one delay. Zero means 30s.
	MaxDelay time.Duration
	// APIKey, when set, is sent as Authorization: Bearer. It never
	// appears in errors or logs.
	APIKey string
	// Client sends the requests; nil means a client with Timeout. The
	// store follows no redirect, whatever the client's CheckRedirect.
	Client *http.Client
	// Logger receives one line per retried attempt; nil means none.
	Logger *slog.Logger
}

// MaxHTTPStateSize bounds the body of a GET the HTTP store reads: a state
// blob, or an error message.
const MaxHTTPStateSize = 1 << 20

// HTTPStore keeps blobs behind an HTTP endpoint: GET URL/KEY loads (404
// means no state), PUT URL/KEY saves. Transport errors and 5xx, 408 and
// 429 responses are retried with exponential back-off and jitter; every
// Save carries an Idempotency-Key header, the same on each retry of that
// save and new for the next one. A redirect is never followed: a 3xx
// answer is a failed load or save (a PUT redirected and replayed as a GET
// would count a 2xx that stored nothing). Bodies are read up to
// MaxHTTPStateSize.
type HTTPStore struct {
	cfg  HTTPConfig
	base *url.URL
	// shown is the base URL without any password, for messages.
	shown string
	// wait is the back-off before the next attempt after n failures.
	wait func(n int) time.Duration
}

// NewHTTPStore checks cfg and returns a store.
func NewHTTPStore(cfg HTTPConfig) (*HTTPStore, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("http state store: state.http.url must be an http:// or https:// URL")
	}
	cfg.Timeout = defaults.Positive(cfg.Timeout, 5*time.Second)
	cfg.MaxAttempts = defaults.Positive(cfg.MaxAttempts, 5)
	cfg.RetryDelay = defaults.Positive(cfg.RetryDelay, 200*time.Millisecond)
	cfg.MaxDelay = defaults.Positive(cfg.MaxDelay, 30*time.Second)
	client := http.Client{Timeout: cfg.Timeout}
	if cfg.Client != nil {
		client = *cfg.Client
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cfg.Client = &client
	shown := confkit.MaskURL(cfg.URL)
	if cfg.APIKey != "" && u.Scheme == "http" && !isLoopbackHost(u.Hostname()) && cfg.Logger != nil {
		cfg.Logger.Warn("the state store's bearer token goes over plain http to a host beyond loopback, where anyone on the way can read it; use an https:// state.http.url", "url", shown)
	}
	return &HTTPStore{cfg: cfg, base: u, shown: shown, wait: backoff.Exponential(cfg.RetryDelay, cfg.MaxDelay)}, nil
}

// isLoopbackHost reports whether host (without port) is a loopback name
// or address.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *HTTPStore) keyURL(key string) string {
	u := *s.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + key
	u.RawPath = ""
	return u.String()
}

func (s *HTTPStore) shownURL(key string) string {
	return strings.TrimSuffix(s.shown, "/") + "/" + key
}

// Load returns key's blob, or nil when the endpoint answers 404.
func (s *HTTPStore) Load(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	var blob []byte
	err := s.do(ctx, "load", key, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.keyURL(key), nil)
		if err != nil {
			return false, err
		}
		resp, err := s.send(req)
		if err != nil {
			return true, err
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusNotFound:
			blob = nil
			return false, nil
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			return false, redirectError(resp)
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			b, err := io.ReadAll(io.LimitReader(resp.Body, MaxHTTPStateSize+1))
			if err != nil {
				return true, fmt.Errorf("reading the body: %w", err)
			}
			if len(b) > MaxHTTPStateSize {
				return false, fmt.Errorf("the state is larger than %d bytes, the most the store reads: is state.http.url the state service?", MaxHTTPStateSize)
			}
			if b == nil {
				b = []byte{}
			}
			blob = b
			return false, nil
		}
		return retryable(resp.StatusCode), statusError(resp)
	})
	return blob, err
}

// Save PUTs key's blob, with one Idempotency-Key for all its attempts.
func (s *HTTPStore) Save(ctx context.Context, key string, blob []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	idem := newIdempotencyKey()
	return s.do(ctx, "save", key, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.keyURL(key), bytes.NewReader(blob))
		if err != nil {
			return false, err
		}
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("Idempotency-Key", idem)
		resp, err := s.send(req)
		if err != nil {
			return true, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			return false, redirectError(resp)
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return false, nil
		}
		return retryable(resp.StatusCode), statusError(resp)
	})
}

func (s *HTTPStore) send(req *http.Request) (*http.Response, error) {
	if s.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.APIKey)
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		// url.Error repeats the URL, which may carry a password; keep
		// only the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, err
	}
	return resp, nil
}

// do runs attempt up to MaxAttempts times while it reports a retryable
// failure, sleeping with back-off between attempts.
func (s *HTTPStore) do(ctx context.Context, op, key string, attempt func(context.Context) (retry bool, err error)) error {
	var last error
	for n := 1; n <= s.cfg.MaxAttempts; n++ {
		actx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		retry, err := attempt(actx)
		cancel()
		if err == nil {
			return nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
		if !retry || n == s.cfg.MaxAttempts {
			break
		}
		delay := s.wait(n)
		if s.cfg.Logger != nil {
			s.cfg.Logger.Warn("state store request failed; retrying", "op", op, "key", key, "attempt", n, "of", s.cfg.MaxAttempts, "retry_in", delay, "error", err.Error())
		}
		if err := backoff.Sleep(ctx, delay); err != nil {
			return fmt.Errorf("%s state of %s at %s: %w (after %d attempts; last error: %v)", op, key, s.shownURL(key), err, n, last)
		}
	}
	return fmt.Errorf("%s state of %s at %s: %w", op, key, s.shownURL(key), last)
}

func retryable(code int) bool {
	return code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
}

// redirectError is the failure of a request answered with a redirect,
// which the store does not follow.
func redirectError(resp *http.Response) error {
	to := resp.Header.Get("Location")
	if resp.Request != nil && to != "" {
		if abs, err := resp.Request.URL.Parse(to); err == nil {
			to = abs.String()
		}
	}
	if to == "" {
		return fmt.Errorf("HTTP %s: the state store answered with a redirect, which is never followed; set state.http.url to the address that answers", resp.Status)
	}
	return fmt.Errorf("HTTP %s to %s: the state store answered with a redirect, which is never followed; set state.http.url to the address that answers", resp.Status, confkit.MaskURL(to))
}

func statusError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	msg := strings.TrimSpace(string(body))
	if msg != "" {
		return fmt.Errorf("HTTP %s: %s", resp.Status, msg)
	}
	return fmt.Errorf("HTTP %s", resp.Status)
}

func newIdempotencyKey() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}
