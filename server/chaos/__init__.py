"""`make chaos`: fault drills against real thinwire servers.

    cd server && python -m chaos              # every drill, the full plan (a few minutes)
    cd server && python -m chaos --quick      # a few cycles each (about a minute)
    cd server && python -m chaos --only sigkill,redis

Each drill starts its own servers (and redis-server, and a small tmpfs) on loopback,
breaks something — SIGKILL, SIGTERM, a full disk, Redis gone, a replica gone, a flood —
and checks what the server promised: nothing acknowledged is lost, refusals are typed,
service comes back. Every process it starts is stopped by its PID, every mount
unmounted, however the drill ends. The run prints a table (tries, survived, lost, and
the figures that matter) and exits non-zero when a drill failed.

    sigkill    concurrent conversations on SQLite, the server SIGKILLed at random frames
    sigterm    runs in progress at SIGTERM: the partial reply a client saw is kept
    diskfull   the SQLite directory on a 3 MiB tmpfs, filled and freed (needs root)
    redis      two replicas, Redis SIGKILLed mid-sends and started again
    replica    a replica SIGKILLed mid-run while another follows the run
    floods     slow-header and silent connections, hundreds of SSE followers; a bystander
"""
