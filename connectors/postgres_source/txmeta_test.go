package postgressource

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/sdk"
)

// TestTransactionTopic: with transaction_topic, every transaction with
// captured changes gets a BEGIN record before its first record and an END
// record after its last, on that topic (Message.Topic), with Debezium's
// fields; a transaction of 5 records split over batches of 2 with a restart
// inside it still has one BEGIN and one END, with the counts of the whole
// transaction. Changes of other tables count for nothing.
func TestTransactionTopic(t *testing.T) {
	for _, format := range []string{"flat", "debezium"} {
		t.Run(format, func(t *testing.T) {
			db := newDB(t)
			db.exec(`CREATE TABLE a (id int PRIMARY KEY); CREATE TABLE b (id int PRIMARY KEY); CREATE TABLE other (id int PRIMARY KEY)`)
			opt := db.cdcOptions("a", "b")
			opt.CDCReader = readerStream
			opt.RecordFormat = "flat"
			if format == "debezium" {
				opt.RecordFormat = "debezium"
			}
			opt.TransactionTopic = "dbserver.transaction"
			opt.BatchSize = 2
			s := open(t, opt, nil)
			db.exec(`BEGIN; INSERT INTO a SELECT generate_series(1, 3); INSERT INTO other VALUES (1); INSERT INTO b VALUES (1), (2); COMMIT`)
			xid := db.value(`SELECT xmin::text FROM a WHERE id = 1`)
			first := next(t, s) // BEGIN and a's first record: 2 messages
			ack(t, s)
			s.Close(context.Background())
			s = open(t, opt, first.State) // a restart inside the transaction
			db.exec(`INSERT INTO b VALUES (3)`)
			var all []sdk.Message
			all = append(all, first.Messages...)
			for len(all) < 10 {
				b := next(t, s)
				all = append(all, b.Messages...)
				ack(t, s)
			}
			var shape []string
			var events []map[string]any
			for _, m := range all {
				if m.Topic == "" {
					shape = append(shape, "r")
					continue
				}
				if m.Topic != "dbserver.transaction" {
					t.Fatalf("topic %q", m.Topic)
				}
				v := decode(t, m)
				events = append(events, v)
				shape = append(shape, v["status"].(string))
				var key map[string]any
				if err := json.Unmarshal(m.Key, &key); err != nil || key["id"] != v["id"] {
					t.Fatalf("key %s, id %v", m.Key, v["id"])
				}
			}
			if got := strings.Join(shape, " "); got != "BEGIN r r r r r END BEGIN r END" {
				// The first run delivered BEGIN and record 1; after the
				// restart records 2-5, END, then the next transaction.
				t.Fatalf("records: %s\n%s", got, payloads(sdk.Batch{Messages: all}))
			}
			begin, end := events[0], events[1]
			if !strings.HasPrefix(begin["id"].(string), xid+":") || end["id"] != begin["id"] || events[2]["id"] == begin["id"] {
				t.Fatalf("ids: %v %v %v (xid %s)", begin["id"], end["id"], events[2]["id"], xid)
			}
			if begin["event_count"] != nil || begin["data_collections"] != nil || begin["ts_ms"] == nil {
				t.Fatalf("BEGIN: %v", begin)
			}
			dc, _ := json.Marshal(end["data_collections"])
			if fmt.Sprint(end["event_count"]) != "5" || string(dc) != `[{"data_collection":"public.a","event_count":3},{"data_collection":"public.b","event_count":2}]` {
				t.Fatalf("END: %v %s", end, dc)
			}
			if fmt.Sprint(events[3]["event_count"]) != "1" {
				t.Fatalf("END of the second transaction: %v", events[3])
			}
		})
	}
}
