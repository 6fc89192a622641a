package supervisor

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/picomq/pico-connectors/runtime/api"
	"github.com/picomq/pico-connectors/runtime/backoff"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/lease"
	"github.com/picomq/pico-connectors/runtime/sourceloop"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// fleetView is the runtime ids each source's lease group showed last.
type fleetView struct {
	mu      sync.Mutex
	members map[string][]string // by source key
}

func (f *fleetView) set(key string, members []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.members == nil {
		f.members = map[string][]string{}
	}
	f.members[key] = members
}

var _ api.Fleet = (*Supervisor)(nil)

// Membership is this runtime's id and mode, and the runtime ids its source
// leases have seen, itself included.
func (s *Supervisor) Membership() api.Membership {
	id := s.cfg.Runtime.RuntimeID()
	mode := s.cfg.Runtime.Mode
	if mode == "" {
		mode = definition.ModeStandalone
	}
	all := []string{id}
	s.fleet.mu.Lock()
	for _, ms := range s.fleet.members {
		all = append(all, ms...)
	}
	s.fleet.mu.Unlock()
	slices.Sort(all)
	return api.Membership{RuntimeID: id, Mode: mode, Members: slices.Compact(all)}
}

// The back-off before a failed connector, or a distributed source that
// failed while this runtime holds it, runs again.
const (
	retryBase = time.Second
	retryMax  = time.Minute
)

// TransactionalID is the transactional.id of source key's producer in
// distributed mode: the same on every runtime, so the one that takes the
// source over fences the one before.
func TransactionalID(key string) string { return lease.GroupPrefix + key }

// runDistributed runs source c in distributed mode until ctx ends: it
// joins the source's lease group and stands by; while this runtime holds
// the lease it builds the source and runs it with a transactional producer
// (the loop fences the previous owner, then loads the state), and stops it
// when the lease is lost. A fenced producer means another runtime owns the
// source: back to Standby, and the lease is released (rejoined). A source
// that fails shows Error and, while the lease is still held, is built and
// run again after a back-off (retryBase doubled to retryMax): a takeover
// can meet a passing failure, such as a replication slot the paused owner
// still holds.
func (s *Supervisor) runDistributed(ctx context.Context, c *conn, env sdk.Env) error {
	key := c.def.Key
	fleet := s.cfg.Runtime.Fleet
	join := func() (*lease.Lease, error) {
		return lease.Start(ctx, lease.Config{
			Key:              key,
			RuntimeID:        s.cfg.Runtime.RuntimeID(),
			BootstrapServers: s.bootstrap,
			Properties:       s.clientProps,
			Topic:            fleet.LeaseTopicName(),
			SessionTimeout:   fleet.SessionTimeoutDuration(),
			Logger:           c.log,
			OnChange: func(v lease.View) {
				c.notePlacement(v.Owner)
				s.fleet.set(key, v.Members)
			},
		})
	}
	wait := backoff.Exponential(retryBase, retryMax)
	// rejoin joins the lease group, again and again while the broker
	// cannot be reached (runtimes may start before it); nil when ctx ends.
	rejoin := func() *lease.Lease {
		for tries := 1; ; tries++ {
			l, err := join()
			if err == nil {
				if c.tracker.Status() == status.Error {
					c.tracker.Set(status.Standby)
				}
				return l
			}
			d := wait(tries)
			c.log.Warn("cannot join the source's lease group; trying again", "err", err.Error(), "in", d.Round(time.Millisecond).String())
			c.tracker.Fail(err)
			if backoff.Sleep(ctx, d) != nil {
				return nil
			}
		}
	}
	l := rejoin()
	if l == nil {
		return nil
	}
	defer func() {
		if l == nil {
			return
		}
		if s.leaving.Load() {
			l.Leave() // the runtime stops: hand the source over at once
		} else {
			l.Close() // a restart: keep the membership, take it back at once
		}
	}()
	failures := 0
	for ctx.Err() == nil {
		lost, err := l.Wait(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// Fatal to the lease, such as a second runtime with this
			// id: the supervisor joins again after a back-off, up to a
			// minute apart, as long as it lasts.
			return err
		}
		c.log.Info("this runtime runs the source now", "runtime_id", s.cfg.Runtime.RuntimeID())
		c.tracker.Set(status.Starting)
		runCtx, stop := context.WithCancel(ctx)
		go func() {
			select {
			case <-lost:
				stop()
			case <-runCtx.Done():
			}
		}()
		err = s.runOwned(runCtx, c, env)
		stop()
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, sourceloop.ErrFenced):
			c.log.Warn("another runtime took the source over; standing by", "err", err.Error())
			c.tracker.Set(status.Standby)
			l.Close()
			if l = rejoin(); l == nil {
				return nil
			}
			continue
		case err != nil && !closed(lost):
			failures++
			d := wait(failures)
			c.log.Error("source stopped; this runtime holds its lease and runs it again", "error", err.Error(), "in", d.Round(time.Millisecond).String())
			if c.tracker.Status() != status.Error {
				c.tracker.Fail(err)
			}
			t := time.NewTimer(d)
			select {
			case <-t.C:
				continue
			case <-lost:
				t.Stop()
			case <-ctx.Done():
				t.Stop()
				return nil
			}
		}
		failures = 0
		c.log.Info("source lease lost; standing by")
		c.tracker.Set(status.Standby)
	}
	return nil
}

// runOwned builds and runs the source while this runtime holds its lease.
func (s *Supervisor) runOwned(ctx context.Context, c *conn, env sdk.Env) error {
	cfg, err := s.sourceConfig(c, env)
	if err != nil {
		c.tracker.Fail(err)
		return err
	}
	cfg.TransactionalID = TransactionalID(c.def.Key)
	return sourceloop.Run(ctx, cfg)
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// notePlacement records the source's owner; the generation counts owner
// changes across this runtime's leases of the source (restarts included).
func (c *conn) notePlacement(owner string) {
	c.placeMu.Lock()
	defer c.placeMu.Unlock()
	if owner != "" && owner != c.lastOwner {
		c.ownerChanges++
		c.lastOwner = owner
	}
	c.tracker.SetPlacement(status.Placement{Owner: owner, Generation: c.ownerChanges})
}
