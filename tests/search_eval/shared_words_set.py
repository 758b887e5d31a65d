"""The "shared-words" set: questions whose words appear in many wrong items.

Three multi-topic transcripts (a team lead's month, a family moving house, a bakery owner's
season), 66 facts, each asked about in other words than its answer. Every question has at
least three distractors in its own transcript that hold its words and do not answer it, and
the transcripts' common words ("team", "release", "move", "order", ...) recur in many more:
keyword matching points at the wrong items; a model that knows meaning finds the answer.

Written for the fusion's cross-validation, after the ranking of the other sets was designed,
and not tuned on: the fusion's parameters are fitted on other transcripts when this one is
scored (see `evaluate.py`).
"""

from __future__ import annotations

import random

from .queries import Query
from .transcripts import Conversation

#: (label, fact, question, distractors)
Fact = tuple[str, str, str, tuple[str, ...]]

TEAMLEAD: list[Fact] = [
    (
        "oncall-swap",
        "Priyanka covers the pager for Tomás from Friday night until Monday morning.",
        "who is on call this weekend instead of the usual person?",
        (
            "The weekend release train is cancelled, nobody should call the release managers.",
            "Is the usual person for the standup notes away? Instead, just post them in chat.",
            "On call reviews happen every weekend for the platform group, usually Sunday.",
        ),
    ),
    (
        "budget-cut",
        "Finance trimmed our cloud spend allowance by 18% starting in Q3.",
        "how much less money will the team get for servers?",
        (
            "The team will get new laptops once the money for Q4 is approved.",
            "How much money does the offsite cost per person? About 900 euros.",
            "Servers in the old rack get less traffic since the team moved the cache.",
        ),
    ),
    (
        "hire-start",
        "Ngozi accepted the offer and her first day is 6 October.",
        "when does the new engineer begin working with us?",
        (
            "When does the new release branch get cut? Usually Wednesday.",
            "The engineer working on search asked to begin the migration early.",
            "We begin the new quarter with a planning week for the whole team.",
        ),
    ),
    (
        "flaky-test",
        "test_checkout_refund fails one run in twenty because it depends on wall-clock time.",
        "why does that unreliable check in the pipeline keep breaking?",
        (
            "The pipeline for the mobile app keeps breaking the build cache.",
            "Why does the coffee machine keep breaking? Nobody descales it.",
            "Check the unreliable wifi in meeting room 3 before the demo.",
        ),
    ),
    (
        "perf-review",
        "Calibration meetings for performance ratings are on 12 and 13 November.",
        "when do managers agree on everyone's appraisal scores?",
        (
            "Managers agree the new ticket template is an improvement.",
            "When do the scores of the hackathon get announced? At the party.",
            "Everyone's laptop needs the new VPN client before Monday.",
        ),
    ),
    (
        "db-choice",
        "We settled on PostgreSQL over DynamoDB for the ledger because we need joins.",
        "what storage technology did we pick for the accounting records, and why?",
        (
            "The accounting team picked a new expense tool last month.",
            "What storage do the records of the old CI runs use? Just S3.",
            "Why did we pick the blue theme for the dashboard? Accessibility.",
        ),
    ),
    (
        "retro-action",
        "Action from the retro: Ana writes a runbook for rotating the API keys.",
        "what follow-up task came out of our look back at the sprint?",
        (
            "The sprint board has a new column for follow-up items.",
            "What task should the intern take next? Maybe the docs.",
            "Look back at the logs from the sprint demo: the video froze.",
        ),
    ),
    (
        "latency-slo",
        "The p99 of the search endpoint must stay under 300 ms.",
        "how fast do lookups have to respond at the slowest end?",
        (
            "How fast does the team respond to support tickets? Within a day.",
            "The slowest part of onboarding is getting hardware.",
            "Lookups of customer records have to go through the audit proxy.",
        ),
    ),
    (
        "offsite-venue",
        "The offsite is at a converted farmhouse near Sintra, 40 minutes from Lisbon.",
        "where will we all gather for the team trip?",
        (
            "We gather for the all-hands in the big room on the fourth floor.",
            "The trip report from the conference is in the wiki.",
            "Where will the new team sit? Near the windows, probably.",
        ),
    ),
    (
        "vendor-contract",
        "The Datadog contract renews on 1 March and has a 60-day notice period.",
        "by when must we tell the monitoring supplier if we want to leave?",
        (
            "Tell the supplier of the office snacks that we want less sugar.",
            "When we leave the building, the monitoring of the doors is off.",
            "We must tell HR by Friday which days we want to work remotely.",
        ),
    ),
    (
        "incident-root",
        "The outage on the 14th was a expired TLS certificate on the internal load balancer.",
        "what caused the downtime in the middle of the month?",
        (
            "The downtime window for the database upgrade is mid-month.",
            "What caused the delay of the design review? Missing slides.",
            "In the middle of the month the team has its social.",
        ),
    ),
    (
        "mentor",
        "Kofi has agreed to pair with Ngozi for her first three months.",
        "who will guide the newcomer as she settles in?",
        (
            "The guide for settling expense claims is in the handbook.",
            "Who will host the newcomer lunch? The office manager.",
            "The settles of the payment batch happen overnight.",
        ),
    ),
    (
        "roadmap-cut",
        "We dropped the GraphQL gateway from this half's plan to focus on reliability.",
        "which project did we remove from the schedule for the next six months?",
        (
            "The schedule for the next six months of on-call is published.",
            "Which project needs a new owner? The metrics exporter.",
            "We remove old feature flags every month.",
        ),
    ),
    (
        "access-request",
        "Production database read access needs approval from two staff engineers.",
        "what sign-off is required before someone can look at live customer data?",
        (
            "Someone left customer data in a public bucket at my last job.",
            "The sign-off for the design doc is required by Thursday.",
            "Look at the live dashboard during the launch.",
        ),
    ),
    (
        "headcount",
        "We are allowed two more backend hires and one SRE next year.",
        "how many people can we add to the group in the coming year?",
        (
            "How many people came to the meetup? About forty.",
            "We can add the group calendar to everyone's phone.",
            "The coming year's holidays are in the shared calendar.",
        ),
    ),
    (
        "deploy-freeze",
        "No production changes from 20 December to 3 January except emergency fixes.",
        "when are we not allowed to ship over the holidays?",
        (
            "Ship the holiday gifts to remote people by the 10th.",
            "We are not allowed to park in the visitor spaces.",
            "When are the holidays for the team in Brazil? Carnival week.",
        ),
    ),
    (
        "cost-spike",
        "The bill jumped because a debug flag left verbose logging on in the ingest workers.",
        "why did our expenses go up so much last month?",
        (
            "Expenses for the conference go through the travel portal.",
            "Why did the standup go on so long last month? Too many topics.",
            "So much of last month went on the migration.",
        ),
    ),
    (
        "okr",
        "Our main objective this quarter: cut the time to restore service to under 30 minutes.",
        "what is the team's top goal for these three months?",
        (
            "The top of the team's wiki page has the contact list.",
            "These three months of logs are archived to cold storage.",
            "What is the goal of the architecture guild? Shared standards.",
        ),
    ),
    (
        "interview-loop",
        "The SRE loop is a systems design round, a debugging round and a values chat.",
        "what stages do candidates go through when they apply to us?",
        (
            "Candidates apply through the careers page or referrals.",
            "The stages of the deploy pipeline are build, test and release.",
            "What do we go through at the quarterly review? Metrics and risks.",
        ),
    ),
    (
        "laptop-policy",
        "Engineers can pick a 14-inch MacBook Pro or a ThinkPad X1, refreshed every three years.",
        "what computer choices does a developer have?",
        (
            "A developer asked about choices of the conference talks.",
            "The computer in the meeting room needs an update.",
            "What does a developer have to do before the release? Update the changelog.",
        ),
    ),
    (
        "pager-noise",
        "Half of last week's alerts came from the disk check on the build agents.",
        "which monitor woke people up the most recently?",
        (
            "People woke up early for the launch in Tokyo.",
            "Which monitor should I buy for home? A 27-inch one.",
            "The most recently hired people join the buddy programme.",
        ),
    ),
    (
        "docs-owner",
        "Mei owns the developer portal and reviews every change to it.",
        "who is responsible for the internal documentation site?",
        (
            "Who is responsible for the office plants? Reception.",
            "The internal site for benefits moved to a new address.",
            "Documentation for the old API is responsible for many tickets.",
        ),
    ),
]

MOVING: list[Fact] = [
    (
        "new-address",
        "From the 1st we live at 27 Larkspur Road, Didsbury, M20 6PL.",
        "where is our new home?",
        (
            "Home insurance for the new flat starts next week.",
            "Where is the tape measure? Our new one is missing.",
            "Our old home had a garden; the new one has a balcony.",
        ),
    ),
    (
        "removal-firm",
        "Pickfords are coming with two vans at 8 am on Saturday the 30th.",
        "which company is transporting our furniture and when?",
        (
            "The company my sister works for is transporting art to Berlin.",
            "Our furniture from IKEA still needs assembling.",
            "When is the company picnic? Sometime in July.",
        ),
    ),
    (
        "school",
        "Lily got a place at St Ambrose Primary, year 3, starting in September.",
        "what school will our daughter attend after the move?",
        (
            "Our daughter wants to move her bed under the window.",
            "The school run after the move will be longer for Sam.",
            "What will our daughter wear for the school play? A cloud costume.",
        ),
    ),
    (
        "broadband",
        "Fibre at the new place is with Zen Internet, installation on 2 September.",
        "when will we be able to get online in the new house?",
        (
            "The new house needs curtains before we can sleep there.",
            "When will we be able to see the fireworks? At nine.",
            "Get the online shopping delivered to the new house from next week.",
        ),
    ),
    (
        "deposit",
        "The landlord returned £1,150 of the £1,300 deposit, keeping £150 for the carpet stain.",
        "how much of the money we paid upfront on the old flat did we get back?",
        (
            "We paid the removal men upfront, which felt risky.",
            "How much money did we get for the old sofa? Forty pounds.",
            "The old flat's heating was never paid for by the landlord.",
        ),
    ),
    (
        "gp",
        "We registered with the Didsbury Medical Centre; Dr Okafor is our named doctor.",
        "which surgery are we now signed up with?",
        (
            "We signed up for the gym's trial month.",
            "The surgery on Sam's knee is now scheduled for October.",
            "Which are we keeping, the old sofa or the new one?",
        ),
    ),
    (
        "keys",
        "The spare keys are with our neighbour Joan at number 29.",
        "who has a copy of the keys to the front door?",
        (
            "The front door of the old flat sticks in winter.",
            "Who has a copy of the lease? I think Sam scanned it.",
            "Keys to the bike shed are on the hook.",
        ),
    ),
    (
        "meter",
        "Gas meter reading on moving day was 04821, electricity 77310.",
        "what numbers did we note for the utilities when we arrived?",
        (
            "The numbers for the removal firm are on the fridge.",
            "We arrived late because the motorway was closed.",
            "Note for the utilities: switch to a fixed tariff next year.",
        ),
    ),
    (
        "piano",
        "The piano needs specialist movers: Keys & Strings charge £240 for the stairs.",
        "how will the instrument get up to the flat and what will it cost?",
        (
            "The flat's stairs will be hard for Grandma.",
            "How will we get the cost of the move down? Fewer boxes.",
            "Lily's instrument lessons will cost more in the new area.",
        ),
    ),
    (
        "mortgage",
        "Our fixed rate is 4.39% for five years with Nationwide.",
        "what interest will we pay on the home loan?",
        (
            "We will pay the home help on Fridays.",
            "What interest does Lily have in the new school clubs? Drama.",
            "The loan of the neighbour's ladder was a lifesaver.",
        ),
    ),
    (
        "council-tax",
        "The new place is in band C: £1,840 a year, paid in ten instalments.",
        "how much will the local authority charge us annually?",
        (
            "How much will the skip cost? The authority says £200.",
            "The local park charges for parking now.",
            "Annually we visit Sam's parents in Cork.",
        ),
    ),
    (
        "cat-move",
        "Biscuit should stay indoors for two weeks so she learns the new house is home.",
        "how long must the pet be kept inside after moving?",
        (
            "Moving the pet bed downstairs made it cosier.",
            "How long must we keep the old flat's paperwork? Six years.",
            "Kept inside all day, the kids go stir crazy.",
        ),
    ),
    (
        "boxes",
        "The kitchen boxes are labelled green, the kids' rooms yellow, our bedroom blue.",
        "how do we tell which room each carton belongs to?",
        (
            "We can tell the kids' room needs painting.",
            "Each carton of milk in the old fridge went off.",
            "How do we tell the landlord we're leaving? By email, in writing.",
        ),
    ),
    (
        "bins",
        "Recycling is collected on alternate Tuesdays; general waste every Thursday.",
        "when does the rubbish get picked up on our street?",
        (
            "The street party is when the kids get to stay up late.",
            "When does the removal van get picked up? Monday.",
            "Our street has a lot of rubbish after the market.",
        ),
    ),
    (
        "parking",
        "The residents' parking permit costs £60 and covers zone D only.",
        "what do we need to leave the car outside the house?",
        (
            "We need to leave the old house spotless.",
            "The car needs a service before the drive north.",
            "Outside the house there is a cherry tree.",
        ),
    ),
    (
        "sale-price",
        "We accepted £312,000 for the old flat from the second buyers.",
        "what did we sell the previous place for?",
        (
            "We sell the previous sofa on Marketplace.",
            "What did the previous owners leave in the loft? Old paint.",
            "The place for the spare bed is the box room.",
        ),
    ),
    (
        "survey",
        "The surveyor found damp in the north wall and a loose roof tile.",
        "what problems did the building inspection find?",
        (
            "The building next door has scaffolding.",
            "What problems did Lily have at the old school? Reading, a bit.",
            "The inspection of the car is due in March.",
        ),
    ),
    (
        "solicitor",
        "Harper & Finch handle the conveyancing; our contact is Ruth Malone.",
        "who are the lawyers dealing with the purchase paperwork?",
        (
            "The purchase of the new washing machine is paperwork-free.",
            "Who are the people dealing with the old flat's garden? The agents.",
            "Lawyers dealing with Sam's work contract are slow.",
        ),
    ),
    (
        "post-redirect",
        "Royal Mail will redirect our post for 12 months, paid until next August.",
        "how long will letters to the old address keep reaching us?",
        (
            "The old address is still on Sam's driving licence.",
            "Letters from the school keep reaching us by email too.",
            "How long will the cake keep? Three days.",
        ),
    ),
    (
        "heating",
        "The boiler is a Worcester Greenstar 30i, serviced last in May.",
        "what make is the thing that heats the water, and when was it checked?",
        (
            "The water in the old flat was always too hard.",
            "What make is the fridge? Samsung, I think.",
            "When was the car checked? Last spring.",
        ),
    ),
    (
        "dentist",
        "The children's dentist is Smile Studio on Wilmslow Road, first check on the 14th.",
        "where do the kids go to get their teeth looked at?",
        (
            "The kids go to the park after school.",
            "Where do we get the blinds looked at? The shop in town.",
            "Their teeth are fine, Lily lost another one.",
        ),
    ),
    (
        "insurance",
        "Contents cover is with Aviva for £18,000, with accidental damage included.",
        "what protects our belongings if something breaks?",
        (
            "Something breaks every time we move.",
            "Our belongings filled two vans in the end.",
            "What protects the floors from the movers? Cardboard sheets.",
        ),
    ),
]

BAKERY: list[Fact] = [
    (
        "flour",
        "Our stoneground flour comes from Shipton Mill, delivered every other Monday.",
        "who supplies the main baking ingredient and how often?",
        (
            "The main oven needs a new baking stone.",
            "Who supplies the coffee beans? A roaster in Bristol.",
            "How often should we clean the ingredient bins? Weekly.",
        ),
    ),
    (
        "oven-fault",
        "The deck oven's bottom element burned out; Rational's engineer replaces it on Thursday.",
        "when will the broken cooking equipment be repaired?",
        (
            "The broken window in the back door will be repaired by the landlord.",
            "When will the cooking class start? In spring.",
            "The equipment for the market stall is in the van.",
        ),
    ),
    (
        "best-seller",
        "The cardamom buns outsell everything else, about 140 on a Saturday.",
        "which product is the most popular?",
        (
            "The most popular day for deliveries is Tuesday.",
            "Which product photos should go on the website?",
            "Popular demand brought back the pumpkin soup.",
        ),
    ),
    (
        "wages",
        "Staff pay goes up to £12.60 an hour from April.",
        "how much will we be paying our employees per hour?",
        (
            "Our employees asked for a longer lunch hour.",
            "How much will we be paying for the new sign? £400.",
            "Per hour the mixer uses about two kilowatts.",
        ),
    ),
    (
        "allergen",
        "The walnut loaf is made on the same bench as everything else, so nothing is nut-free.",
        "can we promise customers with an allergy a safe loaf?",
        (
            "Customers keep asking whether we can promise a loaf after 3 pm.",
            "A safe place for the cash is the locked drawer.",
            "The allergy to cats makes Jo's weekends hard.",
        ),
    ),
    (
        "rent",
        "The landlord wants £2,100 a month from June, up from £1,850.",
        "how much more will the shop premises cost us?",
        (
            "How much more flour do we need for Christmas?",
            "The shop premises need repainting outside.",
            "More customers will cost us more paper bags.",
        ),
    ),
    (
        "wholesale",
        "Harbour Café takes 30 sourdough loaves a day, invoiced monthly.",
        "which business buys our bread in bulk?",
        (
            "Our bread knife is blunt; buy a new one.",
            "Which business card design did we like? The green one.",
            "Bulk orders of paper bags are cheaper.",
        ),
    ),
    (
        "hygiene",
        "The food safety inspector gave us five stars on 9 February.",
        "what rating did we get when the council checked our kitchen?",
        (
            "The kitchen tap is dripping again.",
            "What rating did we get on Google? 4.7.",
            "The council checked the parking bays outside.",
        ),
    ),
    (
        "sourdough-starter",
        "The levain is fed at 10 pm and 6 am with equal weights of flour and water.",
        "what is the routine for keeping the culture alive?",
        (
            "The routine for closing the shop is on the wall.",
            "Keeping the windows clean is a daily job.",
            "Alive and well: the rosemary by the door.",
        ),
    ),
    (
        "card-fees",
        "SumUp takes 1.69% of each card payment.",
        "what percentage does the payment terminal provider charge?",
        (
            "The terminal in the back room is for stock counts.",
            "What percentage of bread is sold before noon? Most of it.",
            "The provider of our electricity charges a standing fee.",
        ),
    ),
    (
        "christmas-hours",
        "Over Christmas we open 7-1 on the 24th and stay shut until the 2nd.",
        "when will the shop be open during the festive season?",
        (
            "The shop door needs a new lock during the winter.",
            "When will the festive menu be printed? Next week.",
            "The season for rhubarb is short.",
        ),
    ),
    (
        "waste",
        "Leftover bread goes to the Too Good To Go app at 4 pm, then to the food bank.",
        "what happens to the loaves nobody buys?",
        (
            "Nobody buys the spelt loaves on weekdays.",
            "What happens to the tips? Shared at month's end.",
            "The loaves for the café go out at 7.",
        ),
    ),
    (
        "new-hire",
        "Marta starts on the morning shift from the 3rd, four days a week.",
        "when does the extra baker join, and how often will she work?",
        (
            "How often does the baker's van get serviced? Yearly.",
            "Join us for the tasting evening on the 20th.",
            "The extra fridge will work fine in the store room.",
        ),
    ),
    (
        "accountant",
        "Our accounts are done by Patel & Co; the year end is 31 March.",
        "who prepares the books and when does our financial year close?",
        (
            "The books on the café shelf are for customers.",
            "When does the market close for the winter? November.",
            "Who prepares the sandwiches on Sundays? Jo.",
        ),
    ),
    (
        "energy",
        "The electricity bill for January was £1,380, mostly the ovens.",
        "how much did power cost us at the start of the year?",
        (
            "The start of the year is always quiet in the shop.",
            "How much did the new scales cost us? £90.",
            "Power to the fridge went off during the storm.",
        ),
    ),
    (
        "market-stall",
        "We have a pitch at the Levenshulme market every Saturday, £35 a week.",
        "where do we sell outside the shop at weekends?",
        (
            "Outside the shop the pavement is being dug up.",
            "Where do we sell gift cards? Only at the till.",
            "Weekends are when the shop sells most bread.",
        ),
    ),
    (
        "butter",
        "We switched to Brittany butter at 82% fat for the laminated pastries.",
        "which dairy product goes into the croissants now?",
        (
            "The croissants sold out by ten on Saturday.",
            "Which product should go on the window display?",
            "Dairy deliveries now come before six.",
        ),
    ),
    (
        "loan",
        "The mixer was bought with a £6,000 loan from the bank at 7.9% over three years.",
        "how did we pay for the big new machine?",
        (
            "The big new sign was paid by the landlord.",
            "How did we get the machine through the door? On its side.",
            "We pay for the window cleaner monthly.",
        ),
    ),
    (
        "review",
        "A food writer from the Evening News called our rye the best in the city.",
        "what did the newspaper critic say about us?",
        (
            "The newspaper for the shop window comes at 6.",
            "What did the landlord say about the sign? He approved it.",
            "Customers say the cakes are too sweet.",
        ),
    ),
    (
        "gluten-free",
        "We decided against a gluten-free range: the kitchen can't keep flour out of the air.",
        "why don't we offer bread for coeliacs?",
        (
            "We offer bread to the shelter on Sundays.",
            "Why don't we open on Mondays? Rest day.",
            "Customers ask about bread for picnics.",
        ),
    ),
    (
        "van",
        "The delivery van is a 2017 Ford Transit Custom, MOT due in August.",
        "what vehicle do we use for drop-offs and when is its test?",
        (
            "We use the back door for drop-offs of flour.",
            "What vehicle does Marta drive? A scooter.",
            "The test batch of pretzels was too salty.",
        ),
    ),
    (
        "instagram",
        "Jo posts on Instagram at 7 am with what's fresh; 4,200 followers now.",
        "who handles our social media and how big is the audience?",
        (
            "The audience at the tasting evening was lovely.",
            "Who handles the cash at closing? Whoever is last.",
            "Our media kit for the markets needs updating.",
        ),
    ),
]

# What the owner of each transcript says besides the facts: filler that shares the
# transcripts' common words, and tool calls as an assistant would make them.
_FILLER: dict[str, tuple[str, ...]] = {
    "teamlead": (
        "Can you draft the agenda for the team meeting on Tuesday?",
        "The release notes need a section on the new search filters.",
        "Remind me to give feedback on the design review to the team.",
        "The team asked for fewer meetings on Wednesdays.",
        "Move the release demo to Thursday, the team is busy.",
        "Book a room for the one-to-ones next week.",
    ),
    "moving": (
        "Can you make a list of everything still to pack?",
        "Remind me to cancel the old flat's window cleaner.",
        "The move is stressful but the kids are excited about the new house.",
        "Add bubble wrap and tape to the shopping list.",
        "The new house smells of fresh paint.",
        "We should throw a small party once the boxes are gone.",
    ),
    "bakery": (
        "Can you work out how many loaves we need for the weekend order?",
        "Add paper bags and labels to the order list.",
        "The shop was busy today, we sold out of bread by two.",
        "Remind me to clean the proving cabinet on Sunday.",
        "The order for the café needs twelve more baguettes on Friday.",
        "Customers keep asking for more rye bread.",
    ),
}


def _conversation(name: str, facts: list[Fact], seed: int) -> Conversation:
    """Facts (said by the user, confirmed by the assistant, or found by a tool), their
    distractors and filler, in a fixed shuffled order."""
    rng = random.Random(seed)
    lines: list[tuple[str | None, str]] = [(label, fact) for label, fact, _, _ in facts]
    lines += [(None, d) for _, _, _, distractors in facts for d in distractors]
    lines += [(None, f) for f in _FILLER[name]]
    rng.shuffle(lines)
    c = Conversation(name)
    for i, (label, text) in enumerate(lines):
        form = i % 5
        if form == 3:  # a note read back by a tool
            c.call("read_notes", {"topic": name, "page": i})
            c.output({"note": text}, ref=label)
        elif form == 4:
            c.assistant(f"Noted: {text}", ref=label)
        else:
            c.user(text, ref=label)
            if form == 1:
                c.assistant("Got it, I'll keep that in mind.")
    return c


def conversations() -> list[Conversation]:
    """A team lead's month, a family moving house, a bakery owner's season."""
    return [
        _conversation("teamlead", TEAMLEAD, 1203),
        _conversation("moving", MOVING, 1204),
        _conversation("bakery", BAKERY, 1205),
    ]


QUERIES: list[Query] = [
    Query(name, question, (label,), "paraphrase")
    for name, facts in (("teamlead", TEAMLEAD), ("moving", MOVING), ("bakery", BAKERY))
    for label, _, question, _ in facts
]
