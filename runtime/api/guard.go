package api

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"strings"
)

// guard refuses what only a browser that another site drives would send.
// A request whose Host names neither this API nor a name in
// Options.AllowedHosts (a page on a name rebound to 127.0.0.1, DNS
// rebinding) gets 421 Misdirected Request. A POST, which changes state,
// needs Content-Type: application/json or an Origin equal to the API's
// own: a cross-site form or a fetch without CORS preflight can send
// neither; a foreign Origin gets 403.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			writeError(w, http.StatusMisdirectedRequest, fmt.Sprintf("host %q is not this API's: name it in http.allowed_hosts (PICOMQ_CONNECTORS_HTTP_ALLOWED_HOSTS), or call the API by its address", r.Host))
			return
		}
		if r.Method == http.MethodPost {
			origin := r.Header.Get("Origin")
			own := origin != "" && strings.EqualFold(origin, s.scheme()+"://"+r.Host)
			switch {
			case origin != "" && !own:
				writeError(w, http.StatusForbidden, fmt.Sprintf("a POST from origin %q is refused: only the API's own origin may send one", origin))
				return
			case !own:
				if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
					writeError(w, http.StatusUnsupportedMediaType, "a POST needs Content-Type: application/json, such as curl -X POST -H 'Content-Type: application/json' URL")
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether the Host header host names this API: an IP
// address (a rebinding page has a name, not an address), localhost, the
// host of the configured address, or a name in Options.AllowedHosts.
func (s *Server) hostAllowed(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.Trim(name, "[]"), ".")
	if name == "" || net.ParseIP(name) != nil || strings.EqualFold(name, "localhost") {
		return true
	}
	if h, _, err := net.SplitHostPort(s.opts.Address); err == nil && strings.EqualFold(h, name) {
		return true
	}
	for _, a := range s.opts.AllowedHosts {
		if strings.EqualFold(a, name) || strings.EqualFold(a, host) {
			return true
		}
	}
	return false
}

// scheme is the scheme the API serves.
func (s *Server) scheme() string {
	if s.opts.TLSCert != "" {
		return "https"
	}
	return "http"
}
