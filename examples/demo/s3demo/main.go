// Command s3demo is the demo's small S3 client: it waits for the local S3
// server, creates the demo bucket, and prints what the S3 sink wrote.
//
//	s3demo wait ENDPOINT
//	s3demo mkbucket ENDPOINT BUCKET
//	s3demo show ENDPOINT BUCKET [N]
//	s3demo topic BROKER TOPIC
//
// Credentials come from DEMO_S3_ACCESS and DEMO_S3_SECRET.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "s3demo:", err)
		os.Exit(1)
	}
}

func client(endpoint string) *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(os.Getenv("DEMO_S3_ACCESS"), os.Getenv("DEMO_S3_SECRET"), ""),
	})
}

func run(args []string) error {
	if len(args) < 2 {
		return errors.New("usage: s3demo wait|mkbucket|show ENDPOINT [BUCKET [N]]")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := client(args[1])
	switch args[0] {
	case "wait":
		var err error
		for i := 0; i < 300; i++ {
			if _, err = c.ListBuckets(ctx, &s3.ListBucketsInput{}); err == nil {
				return nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		return fmt.Errorf("S3 server at %s not ready: %w", args[1], err)
	case "mkbucket":
		if len(args) < 3 {
			return errors.New("mkbucket needs a bucket")
		}
		_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(args[2])})
		var owned *types.BucketAlreadyOwnedByYou
		if errors.As(err, &owned) {
			return nil
		}
		return err
	case "topic":
		if len(args) < 3 {
			return errors.New("topic needs a broker address, a topic and, for the embedded broker, its password file")
		}
		var opts []kgo.Opt
		if len(args) > 3 {
			// The embedded broker needs a login: the runtime's own, from
			// the password it generated in its data dir.
			pw, err := os.ReadFile(args[3])
			if err != nil {
				return err
			}
			opts = append(opts, kgo.SASL(scram.Auth{User: "pico-connectors", Pass: strings.TrimSpace(string(pw))}.AsSha256Mechanism()))
		}
		return topic(ctx, args[1], args[2], opts...)
	case "show":
		if len(args) < 3 {
			return errors.New("show needs a bucket")
		}
		n := 3
		if len(args) > 3 {
			n, _ = strconv.Atoi(args[3])
		}
		return show(ctx, c, args[2], n)
	}
	return fmt.Errorf("unknown command %q", args[0])
}

func show(ctx context.Context, c *s3.Client, bucket string, n int) error {
	var keys []string
	var total int64
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
			total += aws.ToInt64(o.Size)
		}
	}
	fmt.Printf("%d objects, %d bytes in s3://%s\n", len(keys), total, bucket)
	if len(keys) == 0 {
		return nil
	}
	for i, k := range keys {
		if i == n && len(keys) > 2*n {
			fmt.Printf("  ... %d more ...\n", len(keys)-2*n)
		}
		if i < n || i >= len(keys)-n {
			fmt.Println("  " + k)
		}
	}
	for _, k := range []string{keys[0], keys[len(keys)-1]} {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(out.Body)
		out.Body.Close()
		lines := 0
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<20)
		var first []string
		for sc.Scan() {
			lines++
			if len(first) < 2 {
				first = append(first, sc.Text())
			}
		}
		fmt.Printf("\n%s (%d lines), first lines:\n", k, lines)
		for _, l := range first {
			if len(l) > 200 {
				l = l[:200] + "..."
			}
			fmt.Println("  " + l)
		}
		if len(keys) == 1 {
			break
		}
	}
	return nil
}

// topic prints how many records topic holds and the sequence numbers of
// its first and last record: run the demo twice and the first record is
// still the first run's.
func topic(ctx context.Context, brokerAddr, name string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokerAddr), kgo.ConsumeTopics(name), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, name)
	if err != nil {
		return err
	}
	end, ok := ends.Lookup(name, 0)
	if !ok || end.Err != nil || end.Offset == 0 {
		fmt.Printf("%s holds no records yet\n", name)
		return nil
	}
	seq := func(v []byte) string {
		var r struct{ Seq int64 }
		if json.Unmarshal(v, &r) != nil {
			return "?"
		}
		return strconv.FormatInt(r.Seq, 10)
	}
	var first, last string
	for last == "" {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset == 0 {
				first = seq(r.Value)
			}
			if r.Offset == end.Offset-1 {
				last = seq(r.Value)
			}
		})
	}
	fmt.Printf("%s holds %d records (offsets 0-%d): seq %s first, seq %s last\n", name, end.Offset, end.Offset-1, first, last)
	return nil
}
