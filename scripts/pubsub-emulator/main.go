// Command pubsub-emulator serves pstest, the in-memory Pub/Sub fake of
// Google's Go client library (cloud.google.com/go/pubsub/v2), on one loopback
// port: the Publisher, Subscriber and SchemaService gRPC APIs in plain text
// (HTTP/2 without TLS), state in memory only. It logs one "listening" line
// and stops on SIGTERM or SIGINT. scripts/brokers.sh builds and runs it
// (kind pubsub).
//
// What differs from pstest's own server (NewServerWithAddress):
//   - Requests up to 32 MiB reach the service (pstest's server keeps
//     grpc-go's 4 MiB), gzip-compressed ones too. A Publish request over
//     10485760 bytes, the service's limit, fails with INVALID_ARGUMENT and
//     the service's message; one holding a message with neither data nor
//     attributes fails with INVALID_ARGUMENT too (our message: the
//     service's is not known here). pstest checks neither.
//   - -faults DIR: while the file DIR/fault.RPC exists (RPC: Publish,
//     GetTopic, ...), each call of RPC fails with the gRPC code its first
//     word names (UNAVAILABLE when empty), the rest of the line as the
//     message. pstest's reactors (ServerReactorOption) run the check.
//
// With -admin HOST:PORT it is a client instead: it creates -topic (and
// -subscription on it, -ordered for message ordering) on that emulator and
// exits; Google's Rust client does admin calls over REST, which pstest
// does not serve. With -admin and -drain SUBSCRIPTION it pulls and
// acknowledges what that subscription holds and prints one JSON line
// about it (drain below): the benchmark's count of a drain
// (benches/walbench/brokers.py, class PubSub).
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	// gzip request bodies, as the service takes them (the Java client's
	// setEnableCompression, Debezium's compression.threshold.bytes).
	_ "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

const (
	module = "cloud.google.com/go/pubsub/v2"
	// The service's limit on a Publish request (its error names the number).
	maxRequestBytes = 10 << 20
	maxRecvBytes    = 32 << 20
)

// The calls -faults can fail (pstest runs reactors for these and more;
// StreamingPull has none).
var faultRPCs = []string{
	"CreateTopic", "GetTopic", "ListTopics", "DeleteTopic", "Publish",
	"CreateSubscription", "GetSubscription", "Pull", "Acknowledge", "ModifyAckDeadline",
}

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 0, "port to listen on (required)")
	faults := flag.String("faults", "", "directory of fault.RPC files (optional)")
	version := flag.Bool("version", false, "print the pstest module version and exit")
	admin := flag.String("admin", "", "host:port of a running emulator: create -topic (and -subscription on it) there, then exit")
	topic := flag.String("topic", "", "with -admin: the topic to create (projects/P/topics/T)")
	subscription := flag.String("subscription", "", "with -admin: a subscription to create on -topic (projects/P/subscriptions/S)")
	ordered := flag.Bool("ordered", false, "with -subscription: message ordering on")
	drainSub := flag.String("drain", "", "with -admin: pull and acknowledge what this subscription holds (projects/P/subscriptions/S), print one JSON line")
	flag.Parse()
	if *version {
		fmt.Printf("%s %s\n", module, moduleVersion())
		return
	}
	if *admin != "" && *drainSub != "" {
		if err := drain(*admin, *drainSub); err != nil {
			fail(err)
		}
		return
	}
	if *admin != "" {
		if err := create(*admin, *topic, *subscription, *ordered); err != nil {
			fail(err)
		}
		return
	}
	if *port <= 0 || *port > 65535 {
		fail(errors.New("-port is required (1-65535)"))
	}

	opts := []pstest.ServerReactorOption{{FuncName: "Publish", Reactor: publishCheck{}}}
	if *faults != "" {
		for _, rpc := range faultRPCs {
			// First: a fault wins over the checks.
			opts = append([]pstest.ServerReactorOption{{FuncName: rpc, Reactor: fault{*faults, rpc}}}, opts...)
		}
	}
	// pstest's own server cannot take gRPC options: its service state is
	// served here by a server that can, and its own is closed unused.
	// testutil logs a Serve that returns after that close: nothing else of
	// pstest's writes to the standard logger.
	log.SetOutput(io.Discard)
	fake := pstest.NewServerWithAddress("127.0.0.1:0", opts...)
	fake.Close()

	addr := net.JoinHostPort(*host, fmt.Sprint(*port))
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		fail(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxRecvBytes))
	pb.RegisterPublisherServer(srv, &fake.GServer)
	pb.RegisterSubscriberServer(srv, &fake.GServer)
	pb.RegisterSchemaServiceServer(srv, &fake.GServer)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	fmt.Fprintf(os.Stderr, "pubsub-emulator: pstest of %s %s listening on %s\n", module, moduleVersion(), lis.Addr())
	select {
	case sig := <-stop:
		fmt.Fprintf(os.Stderr, "pubsub-emulator: %v, stopping\n", sig)
		// Not GracefulStop: an open StreamingPull would keep it waiting.
		srv.Stop()
	case err := <-served:
		fail(err)
	}
}

// create makes topic, and subscription on it when named, on the emulator at
// addr (plain-text gRPC): what the tests need of the admin API, which
// Google's Rust client calls over REST (pstest serves gRPC only).
func create(addr, topic, subscription string, ordered bool) error {
	if topic == "" {
		return errors.New("-admin needs -topic")
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pb.NewPublisherClient(conn).CreateTopic(ctx, &pb.Topic{Name: topic}); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	if subscription == "" {
		return nil
	}
	_, err = pb.NewSubscriberClient(conn).CreateSubscription(ctx, &pb.Subscription{
		Name: subscription, Topic: topic, EnableMessageOrdering: ordered, AckDeadlineSeconds: 10,
	})
	if err != nil {
		return fmt.Errorf("create subscription %s: %w", subscription, err)
	}
	return nil
}

// What drain prints: the messages read and acknowledged, their data's
// bytes, the first and last publish time (Unix seconds, pstest's clock when
// Publish stored them) and, per message in the order read, a digest of what
// it is (data, ordering key, attributes), its publish time and its data's
// bytes, so that the caller can count distinct messages over several
// drains: a message published twice is two messages with the same digest.
type drained struct {
	Count    int      `json:"count"`
	Bytes    int      `json:"bytes"`
	First    *float64 `json:"first"`
	Last     *float64 `json:"last"`
	Messages [][3]any `json:"messages"`
}

// Pulls per drain call at most, so that a caller polling while messages
// arrive gets an answer (1,000 messages a pull: pstest's default).
const (
	pullMessages = 1000
	maxPulls     = 100
)

// drain pulls subscription on the emulator at addr until a pull returns
// nothing (or maxPulls), acknowledging each pull's messages before the next
// one: pstest rescans a subscription's unacknowledged messages every 10 ms
// and on every pull, so a consumer that leaves them there makes it slower
// for the publishers too. ReturnImmediately: an empty subscription answers
// at once, not after pstest's 500 ms wait.
func drain(addr, subscription string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvBytes)))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sub := pb.NewSubscriberClient(conn)
	out := drained{Messages: [][3]any{}}
	for range maxPulls {
		r, err := sub.Pull(ctx, &pb.PullRequest{Subscription: subscription, MaxMessages: pullMessages,
			ReturnImmediately: true})
		if err != nil {
			return fmt.Errorf("pull %s: %w", subscription, err)
		}
		if len(r.ReceivedMessages) == 0 {
			break
		}
		ids := make([]string, 0, len(r.ReceivedMessages))
		for _, rm := range r.ReceivedMessages {
			ids = append(ids, rm.AckId)
			m := rm.Message
			t := float64(m.PublishTime.AsTime().UnixNano()) / 1e9
			if out.First == nil || t < *out.First {
				out.First = &t
			}
			if out.Last == nil || t > *out.Last {
				out.Last = &t
			}
			out.Count++
			out.Bytes += len(m.Data)
			out.Messages = append(out.Messages, [3]any{digest(m), t, len(m.Data)})
		}
		if _, err := sub.Acknowledge(ctx, &pb.AcknowledgeRequest{Subscription: subscription, AckIds: ids}); err != nil {
			return fmt.Errorf("acknowledge on %s: %w", subscription, err)
		}
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// digest names what a message is, not its id (a republished message gets
// a new id): its data, ordering key and attributes in name order, 16 bytes
// of their SHA-256 in hex.
func digest(m *pb.PubsubMessage) string {
	h := sha256.New()
	h.Write(m.Data)
	h.Write([]byte{0})
	h.Write([]byte(m.OrderingKey))
	names := make([]string, 0, len(m.Attributes))
	for k := range m.Attributes {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		h.Write([]byte{0})
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(m.Attributes[k]))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "pubsub-emulator: %v\n", err)
	os.Exit(1)
}

func moduleVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == module {
				return dep.Version
			}
		}
	}
	return "unknown"
}

// publishCheck refuses what the service refuses and pstest takes.
type publishCheck struct{}

func (publishCheck) React(req any) (bool, any, error) {
	r, ok := req.(*pb.PublishRequest)
	if !ok {
		return false, nil, nil
	}
	if proto.Size(r) > maxRequestBytes {
		return true, nil, status.Errorf(codes.InvalidArgument,
			"Request payload size exceeds the limit: %d bytes.", maxRequestBytes)
	}
	for i, m := range r.Messages {
		if len(m.Data) == 0 && len(m.Attributes) == 0 {
			return true, nil, status.Errorf(codes.InvalidArgument,
				"message %d has neither data nor attributes", i)
		}
	}
	return false, nil, nil
}

// fault fails RPC while the file DIR/fault.RPC exists.
type fault struct{ dir, rpc string }

func (f fault) React(any) (bool, any, error) {
	text, err := os.ReadFile(filepath.Join(f.dir, "fault."+f.rpc))
	if err != nil {
		return false, nil, nil
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(text)), "\n")
	name, msg, _ := strings.Cut(line, " ")
	code := codes.Unavailable
	if name != "" {
		if err := json.Unmarshal([]byte(`"`+name+`"`), &code); err != nil {
			code = codes.Internal
			msg = fmt.Sprintf("fault.%s names no gRPC code: %q", f.rpc, name)
		}
	}
	if msg == "" {
		msg = "injected fault (fault." + f.rpc + ")"
	}
	return true, nil, status.Error(code, msg)
}
