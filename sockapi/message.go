package sockapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// The message API keeps message boundaries: one message is one connection
// (write, close the write side, read to EOF). A request on a new NDP
// connection goes out in the first round trip with no handshake, which is
// the case NDP is built for (zero-RTT RPC).

// Call sends req to addr as one message on a new connection and returns the
// whole response message. ctx bounds the call (deadline and cancellation).
func (s *Stack) Call(ctx context.Context, addr string, req []byte, opts ...DialOption) ([]byte, error) {
	c, err := s.Dial(ctx, addr, opts...)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := bindContext(ctx, c)
	defer stop()
	if _, err := c.WriteAndClose(req); err != nil {
		return nil, ctxErr(ctx, err)
	}
	resp, err := io.ReadAll(c)
	return resp, ctxErr(ctx, err)
}

// CallInto is Call reading the response into resp. A response longer than
// resp fails with ErrMessageTooLarge. The connection never leaves the
// call, so the stack reuses its memory: with a context that has no
// deadline (and no options), an embedded stack's CallInto allocates nothing
// in steady state.
func (s *Stack) CallInto(ctx context.Context, addr Addr, req, resp []byte, opts ...DialOption) (int, error) {
	// The request is queued with the dial (dialWriter) unless ctx has
	// already ended: then the write below fails on ctx's deadline as it
	// always did.
	bc, sent, err := s.dialBackend(ctx, addr, opts, req, ctx.Err() == nil)
	if bc == nil {
		return 0, err
	}
	c := s.callConn(bc)
	stop := bindContext(ctx, c)
	n := 0
	switch {
	case err != nil:
		err = c.opErr("write", err)
	case sent < len(req): // the rest, or all of it (sent -1), and the FIN
		_, err = c.WriteAndClose(req[max(sent, 0):])
	}
	if err == nil {
		n, err = readMessage(c, resp)
	}
	if stop() {
		if sc, ok := c.b.(soonCloser); ok && err == nil {
			sc.closeReuseSoon() // the response ended its stream
		} else {
			c.b.closeReuse()
		}
		s.putCallConn(c)
	} else {
		c.Close() // the cancellation hook may still be running on c
	}
	return n, ctxErr(ctx, err)
}

// SendMessage sends msg to addr as one message on a new connection and
// waits until the receiver has taken it (closed its side); a response, if
// the receiver sends one, is discarded.
func (s *Stack) SendMessage(ctx context.Context, addr string, msg []byte, opts ...DialOption) error {
	c, err := s.Dial(ctx, addr, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := bindContext(ctx, c)
	defer stop()
	if _, err := c.WriteAndClose(msg); err != nil {
		return ctxErr(ctx, err)
	}
	_, err = io.Copy(io.Discard, c) // a reply, if any, is not wanted
	return ctxErr(ctx, err)
}

// readMessage reads c to EOF into buf.
func readMessage(c *Conn, buf []byte) (int, error) {
	n := 0
	for {
		if n == len(buf) {
			m, err := c.Read(c.probe[:])
			if m > 0 {
				return n, ErrMessageTooLarge
			}
			if err == io.EOF {
				return n, nil
			}
			if err != nil {
				return n, err
			}
			continue
		}
		// Only the whole message is of use: the reader is woken when the
		// rest of buf can be filled or the message ended, not per packet.
		m, err := c.readAtLeast(buf[n:], len(buf)-n)
		n += m
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// bindContext applies ctx's deadline to c and makes cancellation fail c's
// blocked calls. It returns a function that undoes the cancellation hook
// and reports whether the hook is sure not to touch c any more (false: it
// ran, or is running, on its own goroutine).
func bindContext(ctx context.Context, c *Conn) func() bool {
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	if ctx.Done() == nil {
		return noHook
	}
	return context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
}

func noHook() bool { return true }

// ctxErr reports ctx's error when the context ended the call. The conn's
// deadline (ctx's deadline, bindContext) can fire a moment before ctx's own
// timer, so a deadline error after ctx's deadline counts as ctx's too.
func ctxErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return errors.Join(cerr, err)
	}
	if d, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(d) {
		return errors.Join(context.DeadlineExceeded, err)
	}
	return err
}

// Message is one received message (RecvMessage): its bytes and the
// connection to reply on.
type Message struct {
	Data []byte
	From Addr
	c    *Conn
}

// RecvMessage returns the next complete message. Answer it with Reply, or
// Close it.
//
// The first call starts the listener's message server, which reads many
// messages at once and hands them out in the order they complete, so a
// slow or stalled sender holds up nobody else (msgserver.go draws it).
// maxSize bounds a message's size (zero means 16 MiB) unless
// SetMessageConfig set MaxSize; the first call's value holds for the
// listener's life, since messages are read ahead of the calls.
//
// A failure that belongs to one message is never RecvMessage's error: a
// message over the size limit, one not complete within
// MessageConfig.ReadTimeout, one whose sender reset it or stopped
// answering, and one from a peer that has MessageConfig.MaxPendingPerPeer
// messages pending already are reset (the sender of an oversized message
// sees ErrMessageTooLarge) and counted in Stack.Stats().Messages. A
// server loop can therefore end on any RecvMessage error: it returns one
// only when the listener was closed (net.ErrClosed), the stack was closed
// (ErrStackClosed) or its ndpd is gone (ErrDaemonGone), or the listener's
// deadline (SetDeadline) passed (os.ErrDeadlineExceeded).
//
// Accept and RecvMessage on one listener do not mix: once RecvMessage ran,
// the message server takes every connection.
func (l *Listener) RecvMessage(maxSize int) (*Message, error) {
	l.msgMu.Lock()
	m := l.msg
	if m == nil {
		cfg := l.msgCfg
		cfg.populate(maxSize)
		m = newMsgServer(l, cfg)
		l.msg = m
	}
	l.msgMu.Unlock()
	return m.next(l.dl.wait())
}

// SetMessageConfig sets the bounds of the listener's message server. It
// must be called before the first RecvMessage (ErrInvalidConfig after).
func (l *Listener) SetMessageConfig(cfg MessageConfig) error {
	l.msgMu.Lock()
	defer l.msgMu.Unlock()
	if l.msg != nil {
		return fmt.Errorf("%w: SetMessageConfig after RecvMessage", ErrInvalidConfig)
	}
	if cfg.MaxSize < 0 || cfg.ReadTimeout < 0 || cfg.MaxPending < 0 || cfg.MaxPendingPerPeer < 0 {
		return fmt.Errorf("%w: negative MessageConfig field: %+v", ErrInvalidConfig, cfg)
	}
	l.msgCfg = cfg
	return nil
}

// Reply sends resp as the response message and closes the connection.
func (m *Message) Reply(resp []byte) error {
	_, err := m.c.WriteAndClose(resp)
	if cerr := m.c.Close(); err == nil {
		err = cerr
	}
	return err
}

// Close ends the message's connection with an empty response.
func (m *Message) Close() error { return m.Reply(nil) }

// Conn is the connection the message arrived on (for deadlines).
func (m *Message) Conn() *Conn { return m.c }
