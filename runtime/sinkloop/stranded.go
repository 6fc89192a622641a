package sinkloop

import (
	"encoding/json"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/sdk"
)

// joinStats is the part of librdkafka's statistics the loop reads.
type joinStats struct {
	Cgrp *struct {
		JoinState string `json:"join_state"`
	} `json:"cgrp"`
}

// stats reads the consumer group's join state from librdkafka's
// statistics. A DeferredSink's partitions are stranded when the member has
// waited longer than strandAfter for a rebalance to complete: the group
// coordinator may have expired this member meanwhile (a broker built on
// upstream kfake expires a member whose JoinGroup waits past its session
// timeout, without answering it) and handed its partitions to another
// member, while librdkafka goes on fetching them here. The sink releases them (open files
// dropped, not uploaded), their records are ignored, and once the group is
// steady again those still assigned are read again from their last commit.
func (l *loop) stats(js string) {
	var st joinStats
	if err := json.Unmarshal([]byte(js), &st); err != nil || st.Cgrp == nil || l.deferred == nil || l.stopping {
		return
	}
	if st.Cgrp.JoinState == "steady" {
		l.unsteadySince = time.Time{}
		if len(l.stranded) > 0 {
			l.retake()
		}
		return
	}
	if l.unsteadySince.IsZero() {
		l.unsteadySince = time.Now()
		return
	}
	if time.Since(l.unsteadySince) < l.strandAfter || len(l.assigned) == 0 {
		return
	}
	parts := l.held()
	l.log.Warn("the consumer group rebalance has not completed for longer than a third of the session timeout: the partitions may have moved to another member; the sink drops their open files and reads them again from the last commit once the group is steady",
		"group", l.cfg.GroupID, "join_state", st.Cgrp.JoinState, "waited", time.Since(l.unsteadySince).Round(time.Millisecond), "partitions", len(parts))
	l.giveUp(parts, true)
	for _, p := range parts {
		l.stranded[p] = true
	}
	l.place()
}

// retake reads the stranded partitions still assigned again from their
// last commit. Those it cannot read again yet (the committed offsets or
// the seek failed) stay stranded and are tried again at the next
// statistics of a steady group.
func (l *loop) retake() {
	asg, err := l.c.Assignment()
	if err != nil {
		l.log.Warn("assignment", "err", err)
		return
	}
	var parts []kafka.TopicPartition
	still := map[sdk.TopicPartition]bool{}
	for _, tp := range asg {
		p := sdk.TopicPartition{Topic: *tp.Topic, Partition: tp.Partition}
		if l.stranded[p] {
			parts = append(parts, tp)
			still[p] = true
		}
	}
	l.stranded = still
	if len(parts) == 0 {
		return
	}
	committed, err := l.c.Committed(parts, int(l.cfg.CloseTimeout.Milliseconds()))
	if err != nil {
		l.log.Warn("stranded partitions: reading the committed offsets failed; tried again while the group is steady", "err", err)
		return
	}
	back := make([]kafka.TopicPartition, 0, len(committed))
	for _, tp := range committed {
		if tp.Error != nil {
			l.log.Warn("stranded partition: reading its committed offset failed; tried again while the group is steady", "topic", *tp.Topic, "err", tp.Error)
			continue
		}
		if tp.Offset < 0 {
			tp.Offset = kafka.OffsetBeginning
		}
		if err := l.c.Seek(tp, 0); err != nil {
			l.log.Warn("stranded partition: seek to the last commit failed; tried again while the group is steady", "topic", *tp.Topic, "err", err)
			continue
		}
		p := sdk.TopicPartition{Topic: *tp.Topic, Partition: tp.Partition}
		delete(l.stranded, p)
		l.assigned[p] = true
		back = append(back, tp)
	}
	if len(back) == 0 {
		return
	}
	// setPaused pauses and resumes only the partitions held: one stranded
	// while the loop had them paused is still paused in librdkafka, and
	// would stay so for good once the loop resumed the others.
	if l.paused {
		err = l.c.Pause(back)
	} else {
		err = l.c.Resume(back)
	}
	if err != nil {
		l.log.Warn("pause/resume failed", "pause", l.paused, "err", err)
	}
	l.place()
	l.log.Info("group steady again: stranded partitions read again from their last commit", "partitions", len(back))
}
