"""The "paraphrase" set: one long chat where a user tells an assistant about their life.

40 facts, each asked about in other words, among 119 distractor messages written to share
the question's words and not answer it ("which drink gives me headaches?" against "Drink
more water, the doctor said" and "The headache of planning this wedding"). This is where
keyword matching misleads and a semantic model shines: the fusion must not drown the model.
Written before any ranking was tuned on it, and not changed since.
"""

from __future__ import annotations

import random

from .queries import Query
from .transcripts import Conversation

#: (label, fact, question, distractors)
FACTS: list[tuple[str, str, str, tuple[str, ...]]] = [
    (
        "cat-food",
        "Biscuit, our cat, will only eat the salmon pâté from Petlandia.",
        "which food will my pet accept?",
        (
            "My pet peeve is people who never return their shopping carts.",
            "The food truck by the office now accepts card payments.",
            "Which food processor should I buy for soups?",
        ),
    ),
    (
        "allergy",
        "I'm allergic to penicillin - I broke out in hives as a kid.",
        "what medicine do I react badly to?",
        (
            "The medicine cabinet in the bathroom needs a new lock.",
            "How badly did the storm damage the fence?",
            "I react to bad news by cleaning the whole house.",
        ),
    ),
    (
        "passport",
        "My passport is in the blue folder in the bottom drawer of the desk.",
        "where do I keep my travel documents?",
        (
            "I keep forgetting to water the plants when I travel.",
            "Where do the kids keep their football boots?",
            "Documents for the mortgage went to the bank yesterday.",
        ),
    ),
    (
        "sam-bday",
        "My husband Sam was born on 14 August; he turns 40 this year.",
        "when is my partner's birthday?",
        (
            "My partner at the law firm retires in August.",
            "The birthday party for Lily's classmate is at the trampoline park.",
            "When is the next partner meeting at work?",
        ),
    ),
    (
        "car",
        "I drive a 2019 Mazda CX-5 in soul red.",
        "what car do I own?",
        (
            "The car wash on Elm Street now does interior cleaning.",
            "Do I own enough chairs for twelve guests?",
            "My neighbour's car alarm went off twice last night.",
        ),
    ),
    (
        "wifi",
        "Wi-Fi at the cabin: network Pinecrest, password lakeview2024.",
        "how do I get online at the lake house?",
        (
            "The lake was too cold to swim in last weekend.",
            "How do I get the kids to bed earlier?",
            "The house insurance letter came online today.",
        ),
    ),
    (
        "diet",
        "I'm vegetarian, though I have fish now and then.",
        "do I eat meat?",
        (
            "Let's meet at the bakery at nine.",
            "I eat lunch at my desk most days.",
            "The meat thermometer is in the second drawer.",
        ),
    ),
    (
        "gp",
        "My GP is Dr. Anjali Rao at the Westside Health Centre.",
        "who is my family doctor?",
        (
            "The family reunion is at aunt Clara's farm this year.",
            "Who is picking up the kids from swimming?",
            "The doctor's office sent a survey about waiting times.",
        ),
    ),
    (
        "mortgage",
        "Our mortgage is with Northbridge Bank, fixed at 3.2% until 2027.",
        "what interest rate do we pay on the house loan?",
        (
            "The house across the road sold in a week.",
            "Interest in the book club has dropped off.",
            "We pay the cleaner every other Friday.",
        ),
    ),
    (
        "train",
        "I catch the 7:42 from Harlow Town to Liverpool Street every weekday.",
        "what time does my morning ride to work leave?",
        (
            "Work is sending everyone on a first-aid course.",
            "The bike ride along the canal was lovely this morning.",
            "What time does the pharmacy open on Sundays?",
        ),
    ),
    (
        "swim",
        "Lily has swimming on Wednesdays at 5pm at the leisure centre.",
        "when is my daughter's pool class?",
        (
            "My daughter wants to paint her room purple.",
            "The pool cover blew off in the wind.",
            "The class teacher emailed about head lice.",
        ),
    ),
    (
        "spare-key",
        "The spare key is under the third flowerpot left of the back door.",
        "where is the extra house key hidden?",
        (
            "The extra chairs are hidden in the garage loft.",
            "Where is the house number plate from the old gate?",
            "The key to the shed is lost for good.",
        ),
    ),
    (
        "blood",
        "My blood type is O negative.",
        "what is my blood group?",
        (
            "The blood donation van comes to the office on Tuesday.",
            "What is the group discount at the zoo?",
        ),
    ),
    (
        "portuguese",
        "I'm learning Portuguese on Tuesday evenings with a tutor called Inês.",
        "which language am I studying?",
        (
            "Studying the bus timetable, the 42 is the only one that goes there.",
            "Which language does the new babysitter speak? Spanish and English.",
            "I'm studying for the driving theory test as well.",
        ),
    ),
    (
        "japan",
        "We're saving for Japan next spring; the fund is at £3,200 so far.",
        "how much money have we put aside for the holiday?",
        (
            "We put the Christmas decorations aside in the attic.",
            "How much money does the school trip cost? £18.",
            "The holiday cottage had a broken boiler last year.",
        ),
    ),
    (
        "boiler",
        "HeatPro serviced the boiler in March; the next service is due next March.",
        "when does the heating system need its next check-up?",
        (
            "The heating in the car only works on full blast.",
            "My next check-up at the dentist is in June.",
            "The system update on my laptop took an hour.",
        ),
    ),
    (
        "shoes",
        "I'm a UK 9 in trainers and an 8.5 in boots.",
        "what shoe size am I?",
        (
            "The running club meets on Saturday at the park gate.",
            "What size is the living room rug? Two by three metres.",
            "Shoe polish is under the sink.",
        ),
    ),
    (
        "boss",
        "Grace Holloway is my line manager; our one-to-ones are Thursday mornings.",
        "who do I report to at work?",
        (
            "I need to report the pothole on Mill Lane to the council.",
            "Work drinks are at the Crown on Friday.",
            "Who do I ask about the parking permit at work?",
        ),
    ),
    (
        "migraine",
        "Red wine gives me a migraine every single time.",
        "which drink gives me headaches?",
        (
            "The headache of planning this wedding is getting to me.",
            "Drink more water, the doctor said.",
            "Which drink should we bring to Tom's party?",
        ),
    ),
    (
        "pickup",
        "The kids are at St. Mary's Primary and finish at 3:15.",
        "what time do I collect the children?",
        (
            "Collect the dry cleaning on Saturday.",
            "The children's choir concert is on the 12th.",
            "What time does the match start? 3pm.",
        ),
    ),
    (
        "rent",
        "Our landlord is Mr. Petrov; the £1,450 rent is due on the 1st.",
        "how much is our monthly housing payment?",
        (
            "Our housing association newsletter arrived.",
            "How much is the monthly gym membership? £35.",
            "The payment for the piano lessons bounced.",
        ),
    ),
    (
        "race",
        "I'm training for the Brighton half marathon on April 6.",
        "which race am I preparing for?",
        (
            "I'm preparing the spare room for mum's visit.",
            "The race for school governor is heating up.",
            "Training on the new expenses system is on Monday.",
        ),
    ),
    (
        "dad-meds",
        "Dad takes 5 mg of amlodipine every morning for his blood pressure.",
        "what pill is my father on?",
        (
            "My father-in-law is visiting in May.",
            "The pill organiser is in the top cupboard.",
            "Dad's garden shed needs a new roof.",
        ),
    ),
    (
        "broadband",
        "The FibreNet contract ends on 30 June; don't let it auto-renew.",
        "when can I switch internet providers?",
        (
            "Switch the bins: blue this week, green next.",
            "The providers of the school meals changed.",
            "Can I switch my dentist appointment to a Friday?",
        ),
    ),
    (
        "zara",
        "Lily's best friend is Zara, who lives at number 12.",
        "who does my daughter hang out with most?",
        (
            "My daughter hangs her coat on the floor every day.",
            "Who does the school run on Mondays? Sam.",
            "Most of the apples this year went to the neighbours.",
        ),
    ),
    (
        "coriander",
        "I can't stand coriander - it tastes like soap to me.",
        "which herb do I dislike?",
        (
            "The herb garden on the windowsill finally sprouted.",
            "I dislike driving at night.",
            "The soap dispenser in the kitchen leaks.",
        ),
    ),
    (
        "wedding",
        "We had our wedding at Hatherley Manor on 2 June 2012.",
        "where did we get married?",
        (
            "The marriage counsellor's office moved to Hill Street.",
            "Where did we put the camping gear?",
            "The manor house museum is closed for renovations.",
        ),
    ),
    (
        "cycling",
        "Sam's cycling club rides out at 7 on Sunday mornings.",
        "when does my husband go biking?",
        (
            "My husband's car is due for its MOT.",
            "When does the bike shop open?",
            "Sunday lunch is at mum's this week.",
        ),
    ),
    (
        "cat-weight",
        "The vet says Biscuit is a bit chubby and should lose half a kilo.",
        "is my cat overweight?",
        (
            "My weight loss app keeps crashing.",
            "Is the cat flap locked at night?",
            "Parking at the vet's is a nightmare.",
        ),
    ),
    (
        "pension",
        "My pension is with Scottish Widows: I pay in 6% and the company adds 4%.",
        "how much does my employer put into my retirement savings?",
        (
            "How much does employer parking cost? Nothing.",
            "The retirement party for Jean is on Friday.",
            "The savings account interest dropped to 2%.",
        ),
    ),
    (
        "lasagne",
        "Granny's lasagne recipe uses nutmeg in the béchamel.",
        "what's the secret spice in grandma's pasta bake?",
        (
            "Grandma's hip operation went well.",
            "The pasta maker from our wedding list is in the loft.",
            "What's the secret to crispy roast potatoes? Semolina.",
        ),
    ),
    (
        "colour",
        "I'm colour-blind: I mix up red and green.",
        "do I have trouble seeing some colours?",
        (
            "Trouble with the neighbours' hedge again.",
            "Seeing the Northern Lights is on my bucket list.",
            "The colours for the bathroom are sage and white.",
        ),
    ),
    (
        "snoring",
        "Sam snores, so I sleep with foam earplugs.",
        "how do I cope with my partner's noise at night?",
        (
            "The noise from the building site starts at 7.",
            "My partner wants a night out on Saturday.",
            "How do I cope with the kids' screen time?",
        ),
    ),
    (
        "home-ins",
        "Our home insurance is with Aviva, policy AV-3381-22, renewing in October.",
        "which company covers our house?",
        (
            "The company Christmas party is at the aquarium.",
            "Our house Wi-Fi keeps dropping in the evening.",
            "Which company makes the best lawn mowers?",
        ),
    ),
    (
        "choir",
        "I sing alto in the community choir; rehearsals are on Monday nights.",
        "what part do I take in the singing group?",
        (
            "What part of town is the new library in?",
            "The group chat for the school mums is too much.",
            "Monday nights are bin nights.",
        ),
    ),
    (
        "tyres",
        "The tyres should be at 36 psi at the front and 33 at the back.",
        "how much air do my wheels need?",
        (
            "The air fryer needs a new basket.",
            "How much do I need for the deposit?",
            "The wheels on Lily's scooter squeak.",
        ),
    ),
    (
        "mum-flight",
        "Mum's flight lands at Gatwick North at 14:20 on the 3rd.",
        "when is my mother arriving?",
        (
            "My mother-in-law's birthday present arrived broken.",
            "When is the parcel arriving? Tomorrow, they say.",
            "Mum's garden looks amazing this year.",
        ),
    ),
    (
        "plumber",
        "Dave Kent, the plumber, fixed the leak under the kitchen sink for £85.",
        "who repaired the dripping pipe?",
        (
            "Who repaired the fence last year? Nobody, it's still broken.",
            "The dripping tap in the bathroom is driving me mad.",
            "The pipe band plays in the square on Saturday.",
        ),
    ),
    (
        "cattery",
        "Biscuit goes to the Whiskers Lodge cattery whenever we go away.",
        "where does the cat stay when we're on holiday?",
        (
            "Where does the night train stay between runs?",
            "The holiday brochure for Crete is on the table.",
            "The cat's water fountain needs a new filter.",
        ),
    ),
    (
        "nuts",
        "Lily is fine with peanuts but allergic to cashews.",
        "which nut can my daughter not eat?",
        (
            "My daughter can't stand broccoli.",
            "The nut roast recipe is in the green book.",
            "Which cereal does Lily eat? The one with honey.",
        ),
    ),
]


def memory() -> Conversation:
    """The chat: facts and distractors in a fixed shuffled order, user messages only."""
    c = Conversation("memory")
    lines = [(label, fact) for label, fact, _, _ in FACTS]
    lines += [(None, d) for _, _, _, distractors in FACTS for d in distractors]
    random.Random(20261130).shuffle(lines)
    for label, text in lines:
        c.user(text, ref=label)
    return c


QUERIES: list[Query] = [
    Query("memory", question, (label,), "paraphrase") for label, _, question, _ in FACTS
]
