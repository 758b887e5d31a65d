"""Two long multi-topic work transcripts: a platform engineer's week, a PhD student's month.

Topics inside one transcript share words on purpose ("upgrade", "lag", "certificate",
"deadline", "submission", "run", "review"), so that a question's words also occur in items
that do not answer it.
"""

from __future__ import annotations

from .transcripts import Conversation


def platform() -> Conversation:
    c = Conversation("platform")
    c.user(
        "Morning. This week: the Postgres 16 upgrade of billing-db, the Lisbon offsite, and "
        "we're interviewing for the SRE opening. Keep track of it all for me."
    )
    c.assistant(
        "Noted: billing-db upgrade to Postgres 16, the team offsite in Lisbon, and the SRE "
        "hiring loop. Where do you want to start?"
    )
    c.user("The upgrade. What's the plan you drafted last week?", ref="pg-plan-q")
    c.call("read_doc", {"doc": "runbooks/billing-db-pg16.md"})
    c.output(
        "billing-db: PostgreSQL 15.6 -> 16.2 with pg_upgrade --link on the primary; replicas "
        "rebuilt from the new primary afterwards. Maintenance window: Saturday 02:00-04:00 UTC. "
        "Before cutover: replica lag under 1 s, pause the invoice-batch cron. Rollback: restore "
        "EBS snapshot snap-0f3a9c taken at 01:55 and repoint the DNS record.",
        ref="pg-runbook",
    )
    c.assistant(
        "The runbook: pg_upgrade --link from 15.6 to 16.2 on Saturday 02:00-04:00 UTC. If it "
        "goes wrong we restore the EBS snapshot snap-0f3a9c (taken at 01:55) and point DNS "
        "back at the old volume.",
        ref="pg-plan",
    )
    c.user(
        "Finance says Saturday night is when the monthly payment batch runs. Move the upgrade "
        "to Sunday, same hours.",
        ref="pg-move-q",
    )
    c.call("update_calendar_event", {"event": "billing-db pg16 upgrade", "day": "Sunday"})
    c.output({"event": "billing-db pg16 upgrade", "start": "Sunday 02:00 UTC", "end": "04:00"})
    c.assistant(
        "Moved: the billing-db upgrade is now Sunday 02:00-04:00 UTC, so it no longer overlaps "
        "the payment batch. I updated the calendar invite for the on-call channel.",
        ref="pg-move",
    )
    c.user(
        "Separate thing: I got an alert that the TLS certificate for api.acmepay.io expires in "
        "6 days. Wasn't cert-manager supposed to renew it on its own?",
        ref="cert-q",
    )
    c.reasoning(
        "Check the cert-manager Certificate and its latest CertificateRequest and Order to see "
        "why renewal has not happened."
    )
    c.call("kubectl", {"args": "describe certificate api-acmepay-io -n ingress"})
    c.output(
        "Status: Ready=False. Reason: Failed. Message: Issuing certificate as Secret does not "
        "contain a certificate; order failed: DNS-01 challenge for api.acmepay.io: "
        "AccessDenied: not authorized to perform route53:ChangeResourceRecordSets on "
        "hostedzone/Z08155",
        ref="cert-error",
    )
    c.assistant(
        "Automatic renewal has been failing: the DNS-01 challenge can't write its TXT record "
        "because the cert-manager IAM role lacks route53:ChangeResourceRecordSets on the "
        "hosted zone. Add that permission and the renewal will go through.",
        ref="cert-diagnosis",
    )
    c.user("Added the permission to the role. Force a renewal.")
    c.call("kubectl", {"args": "cert-manager renew api-acmepay-io -n ingress"})
    c.output(
        {"certificate": "api-acmepay-io", "ready": True, "not_after": "2025-03-14T08:21:07Z"},
        ref="cert-renewed",
    )
    c.assistant(
        "Renewed. The new certificate for api.acmepay.io is valid until 14 March 2025, and "
        "cert-manager will renew it 30 days before that.",
        ref="cert-ok",
    )
    c.user(
        "Now hiring. Set up the panel for Dana Whitfield, the SRE candidate - Thursday 3pm "
        "with me, Ravi and Sofia.",
        ref="dana-panel-q",
    )
    c.call(
        "schedule_interview",
        {"candidate": "Dana Whitfield", "when": "Thursday 15:00", "panel": ["Ravi", "Sofia"]},
    )
    c.output({"status": "scheduled", "room": "Atlas", "duration_min": 90})
    c.assistant(
        "Dana Whitfield's panel is set for Thursday 15:00 in the Atlas room, 90 minutes, with "
        "you, Ravi and Sofia. Her CV lists a CKA certificate and four years of on-call at a "
        "payments company.",
        ref="dana-panel",
    )
    c.user(
        "The invoicer service is way behind, customers are getting invoices hours late. "
        "Can you look at the Kafka side?",
        ref="lag-q",
    )
    c.call("kafka_consumer_groups", {"group": "invoicer", "topic": "invoice-events"})
    c.output(
        {
            "group": "invoicer",
            "topic": "invoice-events",
            "total_lag": 1_204_331,
            "rebalances_last_hour": 47,
            "members": 6,
        },
        ref="lag-stats",
    )
    c.reasoning(
        "47 rebalances an hour means consumers are being kicked out of the group; slow "
        "database writes probably exceed max.poll.interval.ms."
    )
    c.assistant(
        "The invoicer group is 1.2 million messages behind on invoice-events, and it "
        "rebalanced 47 times in the last hour. Each batch does row-by-row inserts into "
        "billing-db that take longer than max.poll.interval.ms (300000), so the broker kicks "
        "the consumer out and the group rebalances over and over instead of making progress.",
        ref="lag-cause",
    )
    c.user("What do you suggest?")
    c.assistant(
        "Raise max.poll.interval.ms to 600000 and switch the consumer to batched inserts "
        "(COPY of 500 rows). That stops the rebalance storm; the backlog should drain within "
        "a few hours.",
        ref="lag-fix",
    )
    c.user("Deployed both. Ping me when it's caught up.")
    c.call("kafka_consumer_groups", {"group": "invoicer", "topic": "invoice-events"})
    c.output({"group": "invoicer", "total_lag": 312, "rebalances_last_hour": 0})
    c.assistant(
        "The invoicer consumers have caught up: lag is down to 312 messages two hours after "
        "the change, with no rebalances since.",
        ref="lag-cleared",
    )
    c.user(
        "Offsite. We said Lisbon, October 8-10, budget 12k euros for eight people. Find a hotel "
        "near Alfama.",
        ref="offsite-q",
    )
    c.call("search_hotels", {"city": "Lisbon", "near": "Alfama", "rooms": 8, "dates": "Oct 8-10"})
    c.output(
        [
            {"hotel": "Memmo Alfama", "per_night": 215, "meeting_room": True},
            {"hotel": "Solar do Castelo", "per_night": 240, "meeting_room": False},
        ]
    )
    c.assistant(
        "Memmo Alfama fits: 215 euros a night per room with a meeting room, so eight rooms for "
        "two nights is about 3,440 euros, well inside the 12k budget. Solar do Castelo has no "
        "meeting room.",
        ref="offsite-hotel-options",
    )
    c.user("Book Memmo Alfama.")
    c.call("book_hotel", {"hotel": "Memmo Alfama", "rooms": 8, "dates": "Oct 8-10"})
    c.output({"confirmation": "MA-55190", "hotel": "Memmo Alfama", "dates": "Oct 8-10"})
    c.assistant(
        "Booked Memmo Alfama, eight rooms, October 8-10. Confirmation MA-55190.",
        ref="offsite-booked",
    )
    c.user("Any tips for people flying in from the US office? Last time everyone was wrecked.")
    c.assistant(
        "For the US folks: fly in a day early, get daylight on arrival and keep the first "
        "session short. Jet lag going east is worse, so put the heavy planning on day two.",
        ref="jetlag",
    )
    c.user(
        "Change of plan on the offsite: half the team has a release on the 9th. Move it to "
        "October 15-17.",
        ref="offsite-move-q",
    )
    c.call("change_booking", {"confirmation": "MA-55190", "dates": "Oct 15-17"})
    c.output({"confirmation": "MA-55190", "dates": "Oct 15-17", "price_change_eur": 0})
    c.assistant(
        "Done: the Lisbon offsite is now October 15-17, same hotel (Memmo Alfama), same "
        "confirmation MA-55190, no change in price.",
        ref="offsite-moved",
    )
    c.user("Sunday: how did the database upgrade go?", ref="pg-result-q")
    c.call("read_channel", {"channel": "#ops-billing", "since": "Sunday 01:30"})
    c.output(
        "02:01 upgrade started. 02:24 pg_upgrade done. 02:31 pg_partman 4.7 incompatible with "
        "16, upgraded extension to 5.0. 02:39 smoke tests green, traffic back. Replicas "
        "rebuilding.",
        ref="pg-log",
    )
    c.assistant(
        "The billing-db upgrade to Postgres 16 finished in 38 minutes (02:01-02:39). One "
        "surprise: the pg_partman extension had to be upgraded from 4.7 to 5.0 to work with "
        "16. Smoke tests passed, no rollback needed; the replicas are rebuilding.",
        ref="pg-result",
    )
    c.user("Feedback from the panel on Dana?", ref="dana-feedback-q")
    c.call("read_doc", {"doc": "hiring/sre/dana-whitfield-feedback.md"})
    c.output(
        "Ravi: excellent incident walkthrough, calm under pressure. Sofia: strong Kubernetes, "
        "weaker Go - struggled with the concurrency exercise. Both: hire.",
        ref="dana-notes",
    )
    c.assistant(
        "The panel recommends hiring Dana: she was excellent in the incident walkthrough and "
        "strong on Kubernetes, weaker on Go (the concurrency exercise). Suggested level: L4.",
        ref="dana-feedback",
    )
    c.user(
        "Last one. The AWS bill: NAT gateway line went up 40% this month. Why?",
        ref="nat-q",
    )
    c.call("cost_explorer", {"service": "EC2-Other", "usage": "NatGateway-Bytes", "group": "az"})
    c.output({"eu-west-1a": 1830, "eu-west-1b": 2410, "delta_vs_last_month": "+40%"})
    c.assistant(
        "The increase is data processing through the NAT gateways: since the invoicer was "
        "scaled out, its consumers in eu-west-1b send S3 uploads through a NAT in another "
        "availability zone. A VPC gateway endpoint for S3 would take that traffic off the NAT "
        "for free.",
        ref="nat-cause",
    )
    c.user("Do it, and send Dana the offer.")
    c.assistant(
        "I opened a change for the S3 VPC endpoint and drafted Dana Whitfield's L4 offer for "
        "your review.",
        ref="wrapup",
    )
    return c


def research() -> Conversation:
    c = Conversation("research")
    c.user(
        "Hi! I'm a PhD student, I need help juggling my paper for ICVR, the training runs, and "
        "my trip to the conference in Vancouver."
    )
    c.assistant("Happy to help. What's most urgent?")
    c.user("My ViT run rn-5521 died overnight. Can you check what happened?", ref="nan-q")
    c.call("read_log", {"run": "rn-5521", "tail": 40})
    c.output(
        "step 13900 loss 2.91 lr 1.0e-03 | step 14000 loss 7.84 | step 14050 loss nan | grad "
        "norm inf | stopping: non-finite loss. config: batch 1024, lr 1e-3, warmup 0, fp16",
        ref="nan-log",
    )
    c.reasoning(
        "Batch size was raised to 1024 while keeping lr 1e-3 and no warmup; with fp16 this "
        "overflowed. Suggest warmup, a lower peak lr and bf16."
    )
    c.assistant(
        "rn-5521 diverged at step 14,050: the loss went to NaN after the gradient norm blew up. "
        "You raised the batch size to 1024 but kept the peak learning rate at 1e-3 with no "
        "warmup, in fp16. I'd add 5k warmup steps, lower the peak to 6e-4 and train in bf16.",
        ref="nan-diagnosis",
    )
    c.user("OK, relaunch with those changes.")
    c.call("launch_run", {"config": "vit_b16.yaml", "lr": 6e-4, "warmup": 5000, "dtype": "bf16"})
    c.output({"run": "rn-5530", "cluster": "cedar", "slurm_job": 884213, "state": "PENDING"})
    c.assistant(
        "Launched as rn-5530 on the cedar cluster (SLURM job 884213): lr 6e-4, 5k warmup "
        "steps, bf16. It's pending in the queue.",
        ref="relaunch",
    )
    c.user(
        "When is the ICVR deadline again? And the abstract?",
        ref="deadline-q",
    )
    c.call("read_web", {"url": "icvr2025 call for papers"})
    c.output(
        "ICVR 2025: abstract registration May 15, full paper submission May 22 (AoE). "
        "Supplementary material one week after.",
        ref="deadline-cfp",
    )
    c.assistant(
        "ICVR 2025: register the abstract by May 15, submit the full paper by May 22, "
        "anywhere on earth. Supplementary material is due a week after the paper.",
        ref="deadline",
    )
    c.user(
        "Helen read the draft. She wants more experiments before we submit, can you pull her "
        "comments?",
        ref="helen-q",
    )
    c.call("read_comments", {"doc": "icvr-draft-v3", "author": "Helen Okafor"})
    c.output(
        [
            "Section 4: the gain may come from the smaller patches, not the method. Add an "
            "ablation over patch size 8/16/32.",
            "Table 2: report mean and std over 3 seeds.",
        ],
        ref="helen-comments",
    )
    c.assistant(
        "Prof. Helen Okafor asks for two things: an ablation over patch sizes 8, 16 and 32 "
        "(she suspects the gain comes from smaller patches), and mean and standard deviation "
        "over three seeds in Table 2.",
        ref="helen-summary",
    )
    c.user("The cluster job hasn't started and now it says preempted?", ref="preempt-q")
    c.call("slurm_status", {"job": 884213})
    c.output(
        {
            "job": 884213,
            "state": "PREEMPTED",
            "reason": "higher-priority reservation rrg-vision started on 4 A100 nodes",
            "requeue": True,
        },
        ref="preempt-status",
    )
    c.assistant(
        "Job 884213 was preempted: a higher-priority reservation (rrg-vision) took the four "
        "A100 nodes. It's requeued automatically and keeps its checkpoint.",
        ref="preempt",
    )
    c.user("Fine. Now the visa for Vancouver - I need one as an Indian citizen, right?")
    c.assistant(
        "Yes: with an Indian passport you need a Canadian visitor visa (TRV). You apply online, "
        "then give biometrics at a visa application centre.",
        ref="visa-needed",
    )
    c.user("Book me the biometrics appointment, earliest slot in Mumbai.", ref="visa-appt-q")
    c.call("book_appointment", {"service": "VFS biometrics", "city": "Mumbai"})
    c.output({"centre": "VFS Global Mumbai", "date": "June 3", "time": "10:15", "ref": "VF-220917"})
    c.assistant(
        "Your biometrics appointment is June 3 at 10:15 at the VFS Global centre in Mumbai "
        "(reference VF-220917).",
        ref="visa-appt",
    )
    c.user("What should I bring to it?", ref="visa-docs-q")
    c.assistant(
        "Bring your passport, the appointment letter VF-220917, the printed application "
        "confirmation, the ICVR invitation letter from the organisers, proof of funds (three "
        "months of bank statements) and your university enrolment letter.",
        ref="visa-docs",
    )
    c.user(
        "Also I agreed to review for the efficient vision workshop. How many papers and when "
        "are the reviews due?",
        ref="reviews-q",
    )
    c.call("read_email", {"from": "workshop chairs", "subject": "review assignments"})
    c.output(
        "Dear reviewer, you have been assigned 3 papers (#12, #31, #44). Reviews are due June "
        "10. Please declare conflicts by May 30.",
        ref="reviews-email",
    )
    c.assistant(
        "You have three papers to review for the workshop (#12, #31, #44), reviews due June "
        "10; declare any conflicts by May 30.",
        ref="reviews",
    )
    c.user("rn-5530 finished?", ref="result-q")
    c.call("read_log", {"run": "rn-5530", "tail": 5})
    c.output(
        "epoch 300 val top1 78.4 top5 94.1 | best top1 78.4 at epoch 297 | done",
        ref="result-log",
    )
    c.assistant(
        "rn-5530 finished cleanly: 78.4% top-1 and 94.1% top-5 on validation, no divergence "
        "with the warmup. That beats the 76.9% of the baseline in the draft.",
        ref="result",
    )
    c.user(
        "Good news, the ICVR deadline got extended by a week! Update my calendar.",
        ref="deadline-ext-q",
    )
    c.call("update_calendar_event", {"event": "ICVR paper deadline", "date": "May 29"})
    c.output({"event": "ICVR paper deadline", "date": "May 29", "abstract": "May 15 (unchanged)"})
    c.assistant(
        "Updated: the ICVR full paper deadline is now May 29 (AoE). The abstract registration "
        "stays May 15.",
        ref="deadline-ext",
    )
    c.user(
        "For reading group next Wednesday I'm presenting. Remind me which paper I picked?",
        ref="rg-q",
    )
    c.call("read_doc", {"doc": "reading-group/schedule.md"})
    c.output("Wed: Arjun - 'Scaling Data-Constrained Language Models' (Muennighoff et al.)")
    c.assistant(
        "You're presenting 'Scaling Data-Constrained Language Models' by Muennighoff et al. at "
        "reading group next Wednesday: what happens when you repeat data during training.",
        ref="rg",
    )
    c.user(
        "Last thing, the lab is buying me a 4TB NVMe for the workstation. Did the purchase "
        "order go through?",
        ref="po-q",
    )
    c.call("procurement_status", {"requester": "arjun", "item": "NVMe 4TB"})
    c.output(
        {
            "po": "PO-77812",
            "item": "Samsung 990 Pro 4TB",
            "status": "approved",
            "delivery": "backordered, ships in 3 weeks",
        },
        ref="po-status",
    )
    c.assistant(
        "Purchase order PO-77812 for the Samsung 990 Pro 4TB is approved, but the drive is "
        "backordered: it ships in about three weeks.",
        ref="po",
    )
    c.user("Thanks. Draft an email to Helen with the new results and the ablation plan.")
    c.assistant(
        "Draft: 'Hi Helen, the bf16 rerun reached 78.4% top-1. I'm running the patch-size "
        "ablation (8/16/32) with three seeds now, and the deadline moved to May 29, so we have "
        "time. Arjun'",
        ref="helen-email",
    )
    return c
