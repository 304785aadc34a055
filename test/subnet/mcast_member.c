/*
 * mcast_member join|leave MGID
 *
 * Joins (SA MCMemberRecord SubnAdmSet, JoinState full member) or leaves
 * (SubnAdmDelete) a multicast group as the local port, through the SA at the SM's
 * LID. Used by the subnet-event tests, run on a third node of the simulated fabric
 * (test/subnet/fabric.sh's RDMA_ASIO_FABRIC_RUN_AS_HCA3): opensm reports trap 66
 * (group created) when the first full member joins and 67 (deleted) when the last
 * one leaves.
 *
 * MGID: IPv6 notation, e.g. ff12:401b:ffff:0000:0000:0000:0000:0001.
 * Prints the SA's answer; exits 0 on success, 1 on a refusal or a time-out, 2 on a
 * usage error. Environment: MCAST_MEMBER_CA / MCAST_MEMBER_PORT pick the port
 * (default: the first active one).
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/umad.h>
#include <infiniband/umad_sa.h>
#include <infiniband/umad_sa_mcm.h>
#include <infiniband/umad_types.h>

static const uint32_t sa_qpn = 1;
static const uint32_t sa_qkey = 0x80010000;

enum {
	MAD_SIZE = 256,
	TRIES = 3,
	TRY_MS = 2000,
	/* IB MTU and rate codes */
	MTU_2048 = 4,
	RATE_10_GBPS = 3,
};

static const uint32_t group_qkey = 0x00000b1b;

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void usage(void)
{
	fprintf(stderr, "usage: mcast_member join|leave MGID\n"
			"  MGID like ff12:401b:ffff:0000:0000:0000:0000:0001\n");
}

int main(int argc, char **argv)
{
	const char *ca = getenv("MCAST_MEMBER_CA");
	const char *portnum_env = getenv("MCAST_MEMBER_PORT");
	int portnum = portnum_env ? atoi(portnum_env) : 0;
	uint8_t mgid[16];
	int join;
	umad_port_t port;
	int fd, agent, rc = 1;
	char buf[sizeof(struct ib_user_mad) + MAD_SIZE];
	char gidstr[INET6_ADDRSTRLEN];
	uint32_t tid_low;

	if (argc != 3) {
		usage();
		return 2;
	}
	if (!strcmp(argv[1], "join"))
		join = 1;
	else if (!strcmp(argv[1], "leave"))
		join = 0;
	else {
		usage();
		return 2;
	}
	if (inet_pton(AF_INET6, argv[2], mgid) != 1 || mgid[0] != 0xff) {
		fprintf(stderr, "mcast_member: not a multicast GID: %s\n", argv[2]);
		return 2;
	}

	if (umad_init() < 0) {
		fprintf(stderr, "mcast_member: umad_init failed\n");
		return 1;
	}
	if (umad_get_port(ca, portnum, &port) < 0) {
		fprintf(stderr, "mcast_member: umad_get_port(%s, %d) failed\n",
			ca ? ca : "NULL", portnum);
		return 1;
	}
	if (!port.sm_lid) {
		fprintf(stderr, "mcast_member: %s port %d has no SM LID (state %u)\n",
			port.ca_name, port.portnum, port.state);
		umad_release_port(&port);
		return 1;
	}
	fd = umad_open_port(port.ca_name, port.portnum);
	if (fd < 0) {
		fprintf(stderr, "mcast_member: umad_open_port: %s\n", strerror(-fd));
		umad_release_port(&port);
		return 1;
	}
	/* no method mask: this agent only sends requests and gets their responses */
	agent = umad_register(fd, UMAD_CLASS_SUBN_ADM, UMAD_SA_CLASS_VERSION, 0, NULL);
	if (agent < 0) {
		fprintf(stderr, "mcast_member: umad_register: %s\n", strerror(-agent));
		goto out_close;
	}

	struct ib_user_mad *umad = (struct ib_user_mad *)buf;
	struct umad_sa_packet *sa = umad_get_mad(umad);
	struct umad_sa_mcmember_record *rec = (struct umad_sa_mcmember_record *)sa->data;
	uint8_t scope = mgid[1] & 0x0f;

	srand((unsigned)(getpid() ^ now_ms()));
	tid_low = (uint32_t)rand();

	memset(buf, 0, sizeof(buf));
	sa->mad_hdr.base_version = UMAD_BASE_VERSION;
	sa->mad_hdr.mgmt_class = UMAD_CLASS_SUBN_ADM;
	sa->mad_hdr.class_version = UMAD_SA_CLASS_VERSION;
	sa->mad_hdr.method = join ? UMAD_METHOD_SET : UMAD_SA_METHOD_DELETE;
	/* the upper 32 TID bits belong to the kernel (hi_tid) / umad2sim+ibsim */
	sa->mad_hdr.tid = htobe64(tid_low);
	sa->mad_hdr.attr_id = htobe16(UMAD_SA_ATTR_MCMEMBER_REC);

	memcpy(rec->mgid, mgid, 16);
	memcpy(rec->portgid, &port.gid_prefix, 8);
	memcpy(rec->portgid + 8, &port.port_guid, 8);
	rec->scope_state = umad_sa_mcm_set_scope_state(scope, UMAD_SA_MCM_JOIN_STATE_FULL_MEMBER);
	if (join) {
		uint64_t mask = UMAD_SA_MCM_COMP_MASK_MGID | UMAD_SA_MCM_COMP_MASK_PORT_GID |
				UMAD_SA_MCM_COMP_MASK_QKEY | UMAD_SA_MCM_COMP_MASK_MTU_SEL |
				UMAD_SA_MCM_COMP_MASK_MTU | UMAD_SA_MCM_COMP_MASK_TCLASS |
				UMAD_SA_MCM_COMP_MASK_PKEY | UMAD_SA_MCM_COMP_MASK_RATE_SEL |
				UMAD_SA_MCM_COMP_MASK_RATE | UMAD_SA_MCM_COMP_MASK_SL |
				UMAD_SA_MCM_COMP_MASK_FLOW_LABEL |
				UMAD_SA_MCM_COMP_MASK_JOIN_STATE;

		sa->comp_mask = htobe64(mask);
		rec->qkey = htobe32(group_qkey);
		rec->pkey = htobe16(0xffff);
		/* at most 2048 bytes and 10 Gb/s: what every simulated link offers */
		rec->mtu = umad_sa_set_rate_mtu_or_life(UMAD_SA_SELECTOR_LESS_THAN, MTU_2048 + 1);
		rec->rate = umad_sa_set_rate_mtu_or_life(UMAD_SA_SELECTOR_LESS_THAN,
							 RATE_10_GBPS + 1);
		rec->tclass = 0;
		rec->sl_flow_hop = umad_sa_mcm_set_sl_flow_hop(0, 0, 0);
	} else {
		sa->comp_mask = htobe64(UMAD_SA_MCM_COMP_MASK_MGID |
					UMAD_SA_MCM_COMP_MASK_PORT_GID |
					UMAD_SA_MCM_COMP_MASK_JOIN_STATE);
	}

	inet_ntop(AF_INET6, rec->portgid, gidstr, sizeof(gidstr));
	printf("mcast_member: %s %s as %s (%s port %d, LID %u) via SM LID %u\n",
	       join ? "join" : "leave", argv[2], gidstr, port.ca_name, port.portnum,
	       port.base_lid, port.sm_lid);

	char req[sizeof(buf)];
	memcpy(req, buf, sizeof(buf));

	for (int attempt = 1; attempt <= TRIES; attempt++) {
		memcpy(buf, req, sizeof(buf));
		umad_set_addr_net(umad, htobe16((uint16_t)port.sm_lid), htobe32(sa_qpn),
				  (int)port.sm_sl, htobe32(sa_qkey));
		umad_set_pkey(umad, 0);
		/* timeout_ms > 0 so that the kernel matches the response to this send */
		if (umad_send(fd, agent, umad, MAD_SIZE, TRY_MS, 0) < 0) {
			fprintf(stderr, "mcast_member: umad_send: %s\n", strerror(errno));
			goto out_unreg;
		}
		long deadline = now_ms() + TRY_MS;
		for (;;) {
			long left = deadline - now_ms();
			if (left <= 0)
				break;
			char in[sizeof(struct ib_user_mad) + MAD_SIZE];
			struct ib_user_mad *r = (struct ib_user_mad *)in;
			struct umad_sa_packet *rsa = umad_get_mad(r);
			int len = MAD_SIZE;
			int got = umad_recv(fd, in, &len, (int)left);
			if (got == -ETIMEDOUT || got == -EWOULDBLOCK)
				continue;
			if (got < 0) {
				fprintf(stderr, "mcast_member: umad_recv: %s\n", strerror(-got));
				continue;
			}
			if (umad_status(r)) { /* our send, timed out (kernel only) */
				fprintf(stderr, "mcast_member: send status %d\n", umad_status(r));
				break;
			}
			if (len < 24 || rsa->mad_hdr.mgmt_class != UMAD_CLASS_SUBN_ADM ||
			    !(rsa->mad_hdr.method & UMAD_METHOD_RESP_MASK) ||
			    (uint32_t)be64toh(rsa->mad_hdr.tid) != tid_low)
				continue; /* not our answer */
			uint16_t status = be16toh(rsa->mad_hdr.status);
			printf("mcast_member: %s answered method 0x%02x status 0x%04x%s\n",
			       join ? "join" : "leave", rsa->mad_hdr.method, status,
			       status ? " (refused)" : " (ok)");
			if (!status && join) {
				struct umad_sa_mcmember_record *a =
					(struct umad_sa_mcmember_record *)rsa->data;
				printf("mcast_member: MLID 0x%04x Q_Key 0x%08x P_Key 0x%04x\n",
				       be16toh(a->mlid), be32toh(a->qkey), be16toh(a->pkey));
			}
			rc = status ? 1 : 0;
			goto out_unreg;
		}
		fprintf(stderr, "mcast_member: no answer in %d ms (try %d of %d)\n",
			TRY_MS, attempt, TRIES);
	}
	fprintf(stderr, "mcast_member: gave up\n");

out_unreg:
	umad_unregister(fd, agent);
out_close:
	umad_close_port(fd);
	umad_release_port(&port);
	umad_done();
	return rc;
}
