package sinkloop

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// member is one raw classic-group member of TestRejoinBesideAPendingSync.
type member struct {
	t        *testing.T
	cl       *kgo.Client
	instance string
	id       string
	gen      int32
}

func (m *member) join(ctx context.Context) (*kmsg.JoinGroupResponse, error) {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.InstanceID = "raw", m.id, kmsg.StringPtr(m.instance)
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 6000, 60000
	req.ProtocolType = "consumer"
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"raw"}
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	req.Protocols = append(req.Protocols, p)
	resp, err := req.RequestWith(ctx, m.cl)
	if err == nil && resp.ErrorCode == 0 {
		m.id, m.gen = resp.MemberID, resp.Generation
	}
	if err == nil && resp.ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	return resp, err
}

func (m *member) sync(ctx context.Context, leader bool, others ...string) error {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.InstanceID, req.Generation = "raw", m.id, kmsg.StringPtr(m.instance), m.gen
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	if leader {
		for _, id := range append([]string{m.id}, others...) {
			a := kmsg.NewSyncGroupRequestGroupAssignment()
			a.MemberID = id
			req.GroupAssignment = append(req.GroupAssignment, a)
		}
	}
	resp, err := req.RequestWith(ctx, m.cl)
	if err == nil && resp.ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	return err
}

// TestRejoinBesideAPendingSync: a static member that comes back (a new
// process, an empty member id) while its old self waits for its SyncGroup
// answer takes its place, and the rebalance that follows completes as soon
// as every member has rejoined, not at the rebalance timeout. kfake
// counted the old self's pending SyncGroup as a pending JoinGroup when it
// removed it: its count of joining members went below zero and every
// rebalance of the group waited out the 60 s rebalance timeout (in the
// fleet scenario, no sink held a partition for the whole run: issue 15).
func TestRejoinBesideAPendingSync(t *testing.T) {
	if testing.Short() {
		t.Skip("a group rebalance")
	}
	b := startBroker(t)
	client := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := &member{t: t, cl: client(), instance: "a"}
	bOld := &member{t: t, cl: client(), instance: "b"}
	if _, err := a.join(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.sync(ctx, true); err != nil {
		t.Fatal(err)
	}
	// b joins; a rejoins; both answered, a leads generation 2.
	joined := make(chan error, 1)
	go func() { _, err := bOld.join(ctx); joined <- err }()
	time.Sleep(200 * time.Millisecond)
	if _, err := a.join(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-joined; err != nil {
		t.Fatal(err)
	}
	// b's old self waits for its SyncGroup answer (a, the leader, has not
	// synced); b comes back as a new process.
	synced := make(chan error, 1)
	go func() { synced <- bOld.sync(ctx, false) }()
	time.Sleep(200 * time.Millisecond)
	bNew := &member{t: t, cl: client(), instance: "b"}
	go func() { _, err := bNew.join(ctx); joined <- err }()
	if err := <-synced; err == nil {
		t.Fatal("the old self's SyncGroup was answered without an error; want it fenced")
	}
	start := time.Now()
	if _, err := a.join(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-joined; err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Fatalf("the rebalance completed after %s, at the rebalance timeout (60 s), not when both had rejoined", waited.Round(time.Second))
	}
}
