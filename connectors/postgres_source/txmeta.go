package postgressource

import (
	"slices"
	"strconv"

	"github.com/picomq/pico-connectors/internal/jsonscan"
	"github.com/picomq/pico-connectors/sdk"
)

// transaction_topic: BEGIN and END records for every transaction with
// captured changes, in the shape of Debezium's provide.transaction.metadata
// events, produced to the topic the configuration names (sdk.Message.Topic)
// in the same batch as the transaction's records:
//
//	key   {"id":"728:26526960"}
//	BEGIN {"status":"BEGIN","id":"728:26526960","ts_ms":1709205255500,"event_count":null,"data_collections":null}
//	END   {"status":"END","id":"728:26526960","ts_ms":1709205255500,"event_count":2,
//	       "data_collections":[{"data_collection":"public.orders","event_count":2}]}
//
// id is the transaction's ID and its commit LSN, ts_ms its commit time.
// BEGIN goes right before the transaction's first captured record, END
// right after its commit; the counts are its captured records, skipped
// ones included after a restart inside it (whose BEGIN went out with the
// first record), so a transaction split by batch_size has one BEGIN and
// one END whatever the restarts.

// appendTxID appends "xid:commitLSN", quoted.
func (d *decoder) appendTxID(buf []byte) []byte {
	buf = append(buf, '"')
	buf = strconv.AppendUint(buf, uint64(d.xid), 10)
	buf = append(buf, ':')
	buf = strconv.AppendUint(buf, uint64(d.txFinal), 10)
	return append(buf, '"')
}

// txEvent appends a BEGIN (end false) or END record of the open
// transaction to the batch.
func (d *decoder) txEvent(end bool) {
	key := d.appendTxID([]byte(`{"id":`))
	key = append(key, '}')
	buf := []byte(`{"status":"BEGIN","id":`)
	if end {
		buf = []byte(`{"status":"END","id":`)
	}
	buf = d.appendTxID(buf)
	buf = append(buf, `,"ts_ms":`...)
	buf = strconv.AppendInt(buf, d.commit.UnixMilli(), 10)
	if !end {
		buf = append(buf, `,"event_count":null,"data_collections":null}`...)
	} else {
		buf = append(buf, `,"event_count":`...)
		buf = strconv.AppendInt(buf, int64(d.txOrder), 10)
		buf = append(buf, `,"data_collections":[`...)
		names := make([]string, 0, len(d.txTables))
		for name := range d.txTables {
			names = append(names, name)
		}
		slices.Sort(names)
		for i, name := range names {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, `{"data_collection":`...)
			buf = jsonscan.AppendString(buf, name)
			buf = append(buf, `,"event_count":`...)
			buf = strconv.AppendInt(buf, int64(d.txTables[name]), 10)
			buf = append(buf, '}')
		}
		buf = append(buf, "]}"...)
	}
	d.msgs = append(d.msgs, sdk.Message{Key: key, Payload: buf, Timestamp: d.commit, Topic: d.s.cfg.TransactionTopic})
}

// txCommit ends the open transaction: its END record when it had
// captured records and transaction_topic is set.
func (d *decoder) txCommit() {
	if d.s.cfg.TransactionTopic != "" && !d.skip && d.txOrder > 0 {
		d.txEvent(true)
	}
}
