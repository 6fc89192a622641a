package sdk_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/picomq/pico-connectors/sdk"
)

// printSink writes each record it is handed, as a sink to any system would.
type printSink struct{ written int }

func (s *printSink) Open(context.Context) error { return nil }

func (s *printSink) Consume(_ context.Context, batch []sdk.Record) error {
	for _, r := range batch {
		fmt.Printf("%s/%d@%d %s\n", r.Topic, r.Partition, r.Offset, r.Payload)
		s.written++
	}
	return nil // the runtime commits the batch's offsets now
}

func (s *printSink) Close(context.Context) error {
	fmt.Println("closed after", s.written, "records")
	return nil
}

// A sink: the runtime opens it once, hands it batches in offset order and
// commits each batch's offsets when Consume returns nil (an error redelivers
// the batch), and closes it on stop.
func ExampleSink() {
	ctx := context.Background()
	var s sdk.Sink = &printSink{}
	if err := s.Open(ctx); err != nil {
		fmt.Println(err)
		return
	}
	_ = s.Consume(ctx, []sdk.Record{
		{Topic: "orders", Offset: 0, Payload: []byte(`{"id":1}`), Schema: sdk.SchemaJSON},
		{Topic: "orders", Offset: 1, Payload: []byte(`{"id":2}`), Schema: sdk.SchemaJSON},
	})
	_ = s.Close(ctx)
	// Output:
	// orders/0@0 {"id":1}
	// orders/0@1 {"id":2}
	// closed after 2 records
}

// counter is a source of numbered records; its state is the next number.
type counter struct {
	committed, next, limit int
}

func (c *counter) Open(_ context.Context, state []byte) error {
	if state != nil {
		n, err := strconv.Atoi(string(state))
		if err != nil {
			return fmt.Errorf("state %q is not a number", state)
		}
		c.committed = n
	}
	c.next = c.committed
	return nil
}

func (c *counter) Poll(context.Context) (sdk.Batch, error) {
	var b sdk.Batch
	for ; c.next < c.limit && len(b.Messages) < 2; c.next++ {
		b.Messages = append(b.Messages, sdk.Message{Payload: []byte(fmt.Sprintf(`{"n":%d}`, c.next))})
	}
	if len(b.Messages) > 0 {
		b.State = []byte(strconv.Itoa(c.next)) // the candidate state
	}
	return b, nil
}

func (c *counter) OnBatchResult(_ context.Context, r sdk.Result) error {
	if r == sdk.Ack {
		c.committed = c.next // only Ack promotes the candidate
	} else {
		c.next = c.committed // Nack: read the batch again
	}
	return nil
}

func (c *counter) Close(context.Context) error { return nil }

// A source: the runtime opens it with the last committed state, polls it,
// produces each batch and reports Ack once every record is acknowledged by
// the broker, then stores the batch's state for the next Open.
func ExampleSource() {
	ctx := context.Background()
	var src sdk.Source = &counter{limit: 5}
	if err := src.Open(ctx, []byte("1")); err != nil { // committed before a restart
		fmt.Println(err)
		return
	}
	for {
		b, err := src.Poll(ctx)
		if err != nil || len(b.Messages) == 0 {
			break
		}
		var payloads []string
		for _, m := range b.Messages {
			payloads = append(payloads, string(m.Payload))
		}
		fmt.Printf("%s state %s\n", strings.Join(payloads, " "), b.State)
		_ = src.OnBatchResult(ctx, sdk.Ack)
	}
	_ = src.Close(ctx)
	// Output:
	// {"n":1} {"n":2} state 3
	// {"n":3} {"n":4} state 5
}

// upper upper-cases one field of a JSON object record.
type upper struct{ field string }

func (u upper) Apply(rec *sdk.TransformRecord) error {
	obj, ok := rec.Value.(map[string]any)
	if !ok {
		return fmt.Errorf("upper: the record is not a JSON object")
	}
	if s, ok := obj[u.field].(string); ok {
		obj[u.field] = strings.ToUpper(s)
	}
	return nil
}

// A transform: the runtime decodes each record, runs the definition's
// [[transforms]] in order, then routes and encodes what they return. An
// error fails the record (a dead letter, or a redelivered batch).
func ExampleTransform() {
	var t sdk.Transform = upper{field: "country"}
	rec := &sdk.TransformRecord{Value: map[string]any{"id": 7.0, "country": "de"}}
	if err := t.Apply(rec); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rec.Value)
	fmt.Println(t.Apply(&sdk.TransformRecord{Value: "not an object"}))
	// Output:
	// map[country:DE id:7]
	// upper: the record is not a JSON object
}
