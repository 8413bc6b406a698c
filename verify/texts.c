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

/* Varied on purpose: narration, dialogue, a fable, instructions, a letter, a
 * counting rhyme, plain facts and a shop scene, so that the prompt set does
 * not measure one kind of text seven times. Each gives >= 160 tokens with the
 * stories260K vocabulary. */
const kvv_text_prompt kvv_text_prompts[KVV_TEXT_PROMPTS] = {
    {"park", kvv_text_story},
    {"dialogue",
     "\"Mom, why is the sky gray today?\" asked Sam. \"Because big clouds are full of "
     "rain,\" said Mom. \"Will it rain soon?\" \"Yes, I think it will rain very soon.\" Sam "
     "looked out of the window. \"Can I go out and jump in the puddles?\" Mom smiled. \"You "
     "can, but you must wear your boots and your yellow coat.\" \"Where are my boots?\" "
     "\"They are by the door, next to the big box.\" Sam ran to the door. He put on one "
     "boot, then the other boot. \"Mom, my coat is too small!\" \"Then take your sister's "
     "coat. She will not mind.\" \"It is pink!\" said Sam. \"Pink is a fine color,\" said "
     "Mom. Sam laughed and put on the pink coat. Then the rain came down. It went drip, "
     "drip, drip on the roof. Sam went out and jumped in the first puddle. Splash! The "
     "water went everywhere. \"Look, Mom, I made a big wave!\" \"I see it,\" said Mom. \"Now "
     "make a bigger one!\" Sam jumped again and again. His dog Spot came out too. Spot "
     "barked at the rain and tried to catch the drops. \"Spot, you are all wet!\" said Sam. "
     "\"You are wet too,\" said Mom, and they all laughed."},
    {"fable",
     "A hungry fox walked in the woods. He had not eaten all day. Then he saw a crow in a "
     "tall tree. The crow had a big piece of cheese in her beak. The fox wanted the "
     "cheese very much. He sat under the tree and looked up. \"Good morning, pretty "
     "crow,\" said the fox. \"Your feathers are so black and shiny. I think your voice must "
     "be the most beautiful in the whole forest. Will you sing a song for me?\" The crow "
     "was very proud. She wanted the fox to hear her song. She opened her beak to sing, "
     "and the cheese fell down. The fox caught the cheese and ate it in one bite. \"Thank "
     "you,\" said the fox. \"Your voice is fine, but next time, think before you sing.\" The "
     "crow was sad and angry. She had lost her cheese because she liked to hear nice "
     "words. From that day on, the crow was careful. When someone said sweet things to "
     "her, she kept her beak shut and thought about why they said them. The moral of the "
     "story is: do not trust those who praise you only to get something from you."},
    {"recipe",
     "This is how you make a simple bread with your mom or dad. First, wash your hands. "
     "Then get a big bowl, a spoon, flour, water, salt, a little sugar and some yeast. Put "
     "warm water in the bowl. Add the sugar and the yeast and stir them. Wait for ten "
     "minutes until you see small bubbles. Next, add the flour, one cup at a time, and the "
     "salt. Mix it with the spoon until it is hard to stir. Now put some flour on the "
     "table and put the dough on it. Push the dough with your hands, fold it, and push "
     "again. Do this for ten minutes. The dough will get soft and smooth. Put the dough "
     "back in the bowl and cover it with a towel. Let it rest in a warm place for one "
     "hour. It will grow to twice its size. Then push it down, make it round and put it "
     "on a tray. Ask a grown-up to heat the oven. Bake the bread for thirty minutes, until "
     "it is brown on top. Let it cool before you cut it. Now you can eat warm bread with "
     "butter and jam. Remember to clean the table and wash the bowl when you are done."},
    {"letter",
     "Dear Grandma, how are you? I hope you are well and that your cat Tom is not sick "
     "any more. I am writing to tell you about my week. On Monday we went to the zoo with "
     "my class. We saw two lions, a tall giraffe and a baby elephant. The baby elephant "
     "played with the water and sprayed it on his mom. Everyone laughed. On Tuesday it "
     "rained, so I stayed inside and drew a picture of the elephant for you. I will send "
     "it with this letter. On Wednesday I lost my first tooth! It was the little one in "
     "the front. I put it under my pillow, and in the morning there was a shiny coin. On "
     "Thursday my friend Anna came to play. We built a tower of blocks that was taller "
     "than me. Then her brother knocked it down, but we were not mad. We built it again. "
     "On Friday Dad made pancakes for dinner. I ate four of them. Mom says we can visit "
     "you next month when school is over. I cannot wait to see you and Tom and your "
     "garden with the red flowers. Please write back soon and tell me what you did this "
     "week. I miss you very much. Love, your grandson Leo."},
    {"counting",
     "One little duck went out to play, over the hill and far away. Mother duck said, "
     "quack, quack, quack, and one little duck came swimming back. Two little cats sat "
     "on a mat. One was thin and one was fat. Three little birds sang in a tree, one for "
     "you and two for me. Four big frogs jumped in the pond. They swam to the rock and "
     "back beyond. Five green apples hung on a branch. The wind blew hard and they did a "
     "dance. Six small fish swam in a line, red and blue and yellow and fine. Seven "
     "bright stars came out at night. They made the dark sky shine so bright. Eight "
     "brown bears went up the hill. They found some honey and ate their fill. Nine busy "
     "bees flew round and round, then went to sleep without a sound. Ten little "
     "children went to bed. Mom kissed each one on the head. Now count them all from one "
     "to ten: one, two, three, four, five, six, seven, eight, nine, ten. Then close your "
     "eyes and count again, and when the sun comes up, my friend, we will play the "
     "counting game again."},
    {"facts",
     "The moon goes around the earth. It takes about one month to go all the way around. "
     "The moon does not make its own light. The light we see is light from the sun that "
     "bounces off the moon. Sometimes we see all of the moon, and we call it a full moon. "
     "Sometimes we see only a thin part of it. The moon has no air and no water, so "
     "nothing can live there. It is covered with gray dust and rocks and big holes. Long "
     "ago, people flew to the moon in a rocket. They walked on the dust and left their "
     "footprints there. The footprints are still there, because there is no wind on the "
     "moon to blow them away. The sun is a star. It is very big and very hot. The earth "
     "goes around the sun once every year. Plants need the light of the sun to grow, and "
     "animals need the plants to eat. At night, when our side of the earth turns away "
     "from the sun, we can see other stars. They look small because they are very, very "
     "far away. Some of them are much bigger than our sun."},
    {"shop",
     "Mia and her dad went to the shop on the corner. The shop was small, but it had many "
     "things. There were red apples, yellow bananas, fresh bread and big bottles of milk. "
     "The shopkeeper was an old man with a white hat. His name was Mr. Brown. \"Hello, "
     "Mia,\" he said. \"What do you need today?\" Mia looked at the list in her hand. \"We "
     "need eggs, milk, bread and three apples,\" she said. Mr. Brown put the eggs in a box "
     "and the bread in a paper bag. Mia picked the three reddest apples she could find. "
     "Dad gave Mr. Brown some money, and Mr. Brown gave him back two coins. Then Mia saw a "
     "jar of candy on the counter. She looked at her dad. \"Can I have one, please?\" Dad "
     "thought for a moment. \"You helped me a lot today, so yes, you can have one.\" Mia "
     "took a green candy and said thank you. On the way home, she carried the bread, and "
     "Dad carried the heavy milk. A little bird sat on the fence and sang. Mia gave the "
     "bird a small piece of bread. The bird ate it and flew away happily."},
};
