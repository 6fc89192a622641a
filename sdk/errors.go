package sdk

import "errors"

// Permanent marks err as an error that trying again cannot mend: a dropped
// table, a revoked permission, an invalidated replication slot. A Poll
// returning it sets the source's status Error at once, where other Poll
// errors do so only after several in a row; the runtime keeps retrying
// with back-off either way, so that an operator's fix is picked up. It
// returns nil for a nil err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err or any error in its chain was marked by
// Permanent, or is a PermanentError whose Permanent method returns true.
func IsPermanent(err error) bool {
	var p PermanentError
	return errors.As(err, &p) && p.Permanent()
}

// PermanentError is what IsPermanent looks for in an error's chain: the
// errors Permanent returns implement it, and so may a connector's own
// error types.
type PermanentError interface {
	error
	Permanent() bool
}

type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() error   { return e.err }
func (e *permanentError) Permanent() bool { return true }
