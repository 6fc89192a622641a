package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// others is the principal of the ACLs Start manages: every user but User
// (a superuser, which no ACL limits).
const others = "User:*"

// clientOpts are the franz-go options a client of the runtime needs to
// reach b: the seed and, with a Password, the SCRAM login as User.
func (b *Broker) clientOpts(opts ...kgo.Opt) []kgo.Opt {
	out := []kgo.Opt{kgo.SeedBrokers(b.addr)}
	if b.password != "" {
		out = append(out, kgo.SASL(scram.Auth{User: User, Pass: b.password}.AsSha256Mechanism()))
	}
	return append(out, opts...)
}

// setACLs replaces the ACLs of others with: produce to and consume from
// topics, and the topics whose names start with one of prefixes. Nothing
// on groups, the cluster or transactional ids: others cannot commit a
// group's offsets, delete or create topics, or change ACLs and users.
// ACLs persist in DataDir, so those of an earlier start (other
// definitions) are deleted first.
func (b *Broker) setACLs(ctx context.Context, topics, prefixes []string) error {
	cl, err := kgo.NewClient(b.clientOpts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	del := kadm.NewACLs().Allow(others).AllowHosts().AnyResource().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
	dres, err := adm.DeleteACLs(ctx, del)
	if err != nil {
		return fmt.Errorf("delete the earlier ACLs: %w", err)
	}
	for _, r := range dres {
		if r.Err != nil {
			return fmt.Errorf("delete the earlier ACLs: %w", r.Err)
		}
	}
	ops := []kadm.ACLOperation{kadm.OpRead, kadm.OpWrite, kadm.OpDescribe}
	var builders []*kadm.ACLBuilder
	if len(topics) > 0 {
		builders = append(builders, kadm.NewACLs().Allow(others).Topics(topics...).Operations(ops...).ResourcePatternType(kadm.ACLPatternLiteral))
	}
	if len(prefixes) > 0 {
		builders = append(builders, kadm.NewACLs().Allow(others).Topics(prefixes...).Operations(ops...).ResourcePatternType(kadm.ACLPatternPrefixed))
	}
	for _, acls := range builders {
		res, err := adm.CreateACLs(ctx, acls)
		if err != nil {
			return err
		}
		var errs []error
		for _, r := range res {
			if r.Err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", r.Name, r.Operation, r.Err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}
