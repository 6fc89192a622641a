package confkit

import (
	"net/url"
	"regexp"
	"strings"
)

// MaskURL returns s, a URL, with what may carry a secret masked: the user
// information whole (user name and password: a token is often sent as the
// user name) and the value of every query parameter (?token=...). A value
// that looks like a URL with user information or a query but does not
// parse is masked whole. Anything else is returned as it is.
func MaskURL(s string) string {
	if !strings.Contains(s, "://") || (!strings.ContainsAny(s, "@?") && !strings.Contains(s, "%40")) {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return Mask
	}
	if u.User != nil {
		u.User = url.User(Mask)
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k, vs := range q {
			for i := range vs {
				vs[i] = Mask
			}
			q[k] = vs
		}
		u.RawQuery = strings.ReplaceAll(q.Encode(), url.QueryEscape(Mask), Mask)
	}
	return strings.Replace(u.String(), url.PathEscape(Mask)+"@", Mask+"@", 1)
}

// urlInText finds URLs in free text: a scheme, "://", and everything up to
// white space or a quote.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// MaskURLs returns text with every URL in it masked by MaskURL: for
// messages that may quote one, such as a client's error, a log line or a
// connector's last error.
func MaskURLs(text string) string {
	if !strings.Contains(text, "://") {
		return text
	}
	return urlInText.ReplaceAllStringFunc(text, MaskURL)
}
