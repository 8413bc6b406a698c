/* texts.c — see texts.h. */
#include "verify/texts.h"

const char kvv_text_story[] =
    "Once upon a time, there was a little girl named Lily. She lived in a small house "
    "near a big park. Every morning, Lily went to the park with her mom. She liked to "
    "play on the swings and run in the green grass. One day, Lily saw a small dog under "
    "a tree. The dog was sad and alone. Lily asked her mom, \"Can we help the dog?\" Her "
    "mom said, \"Yes, let's find out where it lives.\" They looked at the dog's collar. "
    "It had a name on it. The name was Max. Lily and her mom walked around the park. They "
    "asked many people if they knew Max. A kind old man said, \"I know Max! He lives with "
    "Tom, the boy in the red house.\" Lily was very happy. She held Max and walked to the "
    "red house. Tom opened the door. When he saw Max, he smiled a big smile. \"Thank you, "
    "thank you!\" said Tom. \"I was looking for him all day.\" Tom gave Lily a hug. Then he "
    "asked, \"Do you want to play with me and Max?\" Lily said yes. They played with a ball "
    "in the yard. Max ran and jumped and barked. The sun was warm and the sky was blue. "
    "Lily and Tom became good friends. After that day, they played together every day. "
    "They went to the park, they shared their toys, and they helped each other. Lily "
    "learned that being kind to others makes everyone happy. When she went to bed that "
    "night, she told her mom about her new friend. Her mom smiled and said, \"I am proud "
    "of you, Lily.\" Lily closed her eyes and dreamed about the park, the sun, and her "
    "friends Tom and Max. The next day, Lily woke up early. She ate her breakfast and put "
    "on her shoes. She could not wait to see Tom and Max again. She ran to the door and "
    "said, \"Mom, can we go to the park now?\" Her mom laughed and said, \"Yes, my dear. "
    "Let's go!\"";

const char *const kvv_text_turns[KVV_TEXT_TURNS] = {
    "Once upon a time, there was a boy named Ben.",
    "Ben had a red ball. He liked to throw it high.",
    "One day, the ball went over the fence.",
    "Ben was sad. He wanted his ball back.",
    "He saw a girl named Sue on the other side.",
    "\"Can you give me my ball?\" Ben asked.",
    "Sue smiled and threw the ball back to him.",
    "Ben said, \"Thank you! Do you want to play?\"",
    "They played with the ball in the sun.",
    "Then it started to rain. The sky was dark.",
    "They ran inside and drank warm milk.",
    "Ben's mom made them cookies.",
    "The cookies were big and sweet.",
    "After the rain, they went out to see a rainbow.",
    "The rainbow had many colors. Sue loved it.",
    "They found a little frog near the water.",
    "The frog jumped and they laughed.",
    "When it was time to go home, Sue waved goodbye.",
    "Ben was happy. He had a new friend.",
    "That night, Ben dreamed of balls, frogs and rainbows.",
};
